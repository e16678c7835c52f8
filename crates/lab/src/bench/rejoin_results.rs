//! The rejoin scenario's results: one run per restart of a node, and what
//! a target's rounds of one variant come to (`Rejoin::summary`).

use super::results::{median, sorted};
use super::transfer::Transfer;
use serde::{Deserialize, Serialize};
use tandem::cluster::ProviderKind;

/// How the restarted node was away.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejoinVariant {
    /// SIGTERM (a clean shutdown), then a fixed number of write-sets.
    Stop,
    /// The same, restarted with `wsrep_sst_donor` naming node 1: Tandem's
    /// leader, so the IST comes from the leader's Raft where `Stop`'s comes
    /// from a follower's log (issue 48's comparison).
    FromNode1,
    /// SIGKILL, then the same number of write-sets.
    Kill,
    /// SIGTERM, then a steady load for a fixed time.
    Downtime,
}

impl RejoinVariant {
    pub fn label(self) -> &'static str {
        match self {
            RejoinVariant::Stop => "clean stop",
            RejoinVariant::FromNode1 => "clean stop, donor node 1",
            RejoinVariant::Kill => "kill -9",
            RejoinVariant::Downtime => "downtime",
        }
    }
}

/// The rejoin scenario: a node stopped, write-sets written meanwhile, the
/// node restarted and timed until it is Synced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Rejoin {
    /// Write-sets asked for while the node is away (sysbench `--events`).
    pub writes: u64,
    pub rounds: u32,
    /// sysbench client threads on node 1 while the node is away.
    pub threads: u32,
    /// The downtime variant: seconds of steady load at `rate` transactions
    /// per second (0: the variant was not run).
    pub downtime_s: u32,
    pub rate: u32,
    /// The node that is stopped and restarted (the last one); node 1 takes the writes.
    pub node: usize,
    /// InnoDB data and indexes of the sysbench tables on node 1 of the first
    /// replicated target when the scenario started, MiB.
    #[serde(default)]
    pub data_mib: Option<f64>,
    /// Why the scenario did not run at all.
    pub skipped: Option<String>,
    pub runs: Vec<RejoinRun>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RejoinRun {
    pub target: Option<ProviderKind>,
    pub variant: Option<RejoinVariant>,
    pub round: u32,
    /// Seqnos node 1 committed while the node was away (one per write-set).
    pub writes: u64,
    /// How long writing them took.
    pub write_s: f64,
    /// `wsrep_replicated_bytes` of node 1 over those writes, MiB: what the
    /// donor's cache had to hold for an IST.
    pub write_mib: f64,
    pub transfer: Transfer,
    /// The line of the node's error log that `transfer` rests on.
    pub evidence: Option<String>,
    /// From the start command (position recovery included) until the node
    /// reported Synced.
    pub synced_s: f64,
    /// Set when the run failed; the figures are then zero.
    pub error: Option<String>,
}

/// A target's rounds of one rejoin variant taken together.
#[derive(Clone, Debug, PartialEq)]
pub struct RejoinSummary {
    /// Rounds measured (failed ones are not).
    pub rounds: usize,
    pub failed: usize,
    /// Medians of the rounds.
    pub writes: f64,
    pub write_mib: f64,
    pub synced_s: f64,
    pub synced_min_s: f64,
    pub synced_max_s: f64,
    /// (max - min) / median of the rounds' time to Synced, percent.
    pub spread_pct: f64,
    pub ist: usize,
    pub sst: usize,
    pub unknown: usize,
}

impl RejoinSummary {
    /// "IST", "SST", "IST 2, SST 1", ...: what the rounds did.
    pub fn transfers(&self) -> String {
        let parts: Vec<(usize, &str)> =
            [(self.ist, "IST"), (self.sst, "SST"), (self.unknown, "?")].into_iter().filter(|p| p.0 > 0).collect();
        match parts.as_slice() {
            [] => "–".into(),
            [(_, one)] => (*one).to_string(),
            many => many.iter().map(|(n, t)| format!("{t} {n}")).collect::<Vec<_>>().join(", "),
        }
    }
}

impl Rejoin {
    /// The variants that were run, in order.
    pub fn variants(&self) -> Vec<RejoinVariant> {
        let mut v: Vec<RejoinVariant> = self.runs.iter().filter_map(|r| r.variant).collect();
        v.sort();
        v.dedup();
        v
    }

    pub fn summary(&self, target: ProviderKind, variant: RejoinVariant) -> Option<RejoinSummary> {
        let all: Vec<&RejoinRun> =
            self.runs.iter().filter(|r| r.target == Some(target) && r.variant == Some(variant)).collect();
        let ok: Vec<&RejoinRun> = all.iter().copied().filter(|r| r.error.is_none()).collect();
        if ok.is_empty() {
            return None;
        }
        let synced = sorted(ok.iter().map(|r| r.synced_s));
        let mid = median(&synced);
        let count = |t: Transfer| ok.iter().filter(|r| r.transfer == t).count();
        Some(RejoinSummary {
            rounds: ok.len(),
            failed: all.len() - ok.len(),
            writes: median(&sorted(ok.iter().map(|r| r.writes as f64))),
            write_mib: median(&sorted(ok.iter().map(|r| r.write_mib))),
            synced_s: mid,
            synced_min_s: synced[0],
            synced_max_s: synced[synced.len() - 1],
            spread_pct: if mid > 0.0 { (synced[synced.len() - 1] - synced[0]) / mid * 100.0 } else { 0.0 },
            ist: count(Transfer::Ist),
            sst: count(Transfer::Sst),
            unknown: count(Transfer::Unknown),
        })
    }

    /// Whether the target ran this variant at all (failed or not).
    pub fn ran(&self, target: ProviderKind, variant: RejoinVariant) -> bool {
        self.runs.iter().any(|r| r.target == Some(target) && r.variant == Some(variant))
    }

    /// Tandem's median time to Synced / Galera's: below 1 means Tandem is back sooner.
    pub fn ratio(&self, variant: RejoinVariant) -> Option<f64> {
        let t = self.summary(ProviderKind::Tandem, variant)?;
        let g = self.summary(ProviderKind::Galera, variant)?;
        (g.synced_s > 0.0).then(|| t.synced_s / g.synced_s)
    }

    pub fn failed(&self) -> usize {
        self.runs.iter().filter(|r| r.error.is_some()).count()
    }
}
