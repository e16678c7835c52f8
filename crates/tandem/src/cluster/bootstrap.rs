//! `tandem cluster bootstrap`: bring a cluster that lost its primary
//! component back from its most advanced node.
//!
//! With Tandem's durable log a whole-cluster restart needs no bootstrap (a
//! majority of the last members forms the group again by itself); this is
//! for when that majority is gone for good. The most advanced node is the
//! one whose group log reaches furthest (Raft's (term, index) order: it
//! holds every acknowledged commit a survivor holds), then the one whose
//! database is furthest (`wsrep_last_committed`, grastate.dat or
//! `--wsrep-recover`; the only measure for Galera nodes). Bootstrapping a
//! less advanced node loses what only the others hold, so it is refused
//! unless forced.

pub(crate) use super::{mark_safe_to_bootstrap, parse_recovered_position};
use super::{recover_position, Cluster, ProviderKind};
use anyhow::{bail, Context, Result};
use std::cmp::Ordering;
use std::path::Path;
use std::time::Duration;

/// One node, as far as choosing whom to bootstrap goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub index: usize,
    pub name: String,
    pub running: bool,
    /// (term, index) of the last entry of its group log, if it has a
    /// trusted one.
    pub log_last: Option<(u64, u64)>,
    /// Why its group log does not count (it would not reuse it).
    pub log_note: Option<String>,
    /// Seqno its database is at, when known.
    pub seqno: Option<i64>,
}

impl Candidate {
    fn rank(&self) -> (Option<(u64, u64)>, Option<i64>) {
        (self.log_last, self.seqno)
    }

    /// "log 3/1042, seqno 1005" for messages and tables.
    pub fn describe(&self) -> String {
        let log = match (self.log_last, &self.log_note) {
            (Some((term, index)), _) => format!("log {term}/{index}"),
            (None, Some(note)) => format!("log not usable ({note})"),
            (None, None) => "no log".into(),
        };
        let seqno = self.seqno.map_or("seqno unknown".into(), |s| format!("seqno {s}"));
        format!("{log}, {seqno}")
    }
}

/// What `bootstrap` did.
#[derive(Debug)]
pub struct Outcome {
    pub candidates: Vec<Candidate>,
    pub chosen: usize,
    /// `pc.bootstrap=YES` on a running node rather than a start with
    /// `--wsrep-new-cluster`.
    pub in_place: bool,
    /// Other nodes started afterwards (they rejoin the new component).
    pub started: Vec<usize>,
}

/// The candidate to bootstrap: `wanted` if given and nobody is strictly
/// more advanced (or `force`), else the most advanced one (the lowest
/// number among equals).
pub fn choose(candidates: &[Candidate], wanted: Option<usize>, force: bool) -> Result<usize> {
    let best = candidates
        .iter()
        .max_by(|a, b| a.rank().cmp(&b.rank()).then(b.index.cmp(&a.index)))
        .context("the cluster has no nodes")?;
    let Some(wanted) = wanted else { return Ok(best.index) };
    let chosen = candidates.iter().find(|c| c.index == wanted).with_context(|| format!("there is no node {wanted}"))?;
    if chosen.rank().cmp(&best.rank()) == Ordering::Less && !force {
        bail!(
            "{} is less advanced ({}) than {} ({}): bootstrapping it would lose what only the others hold. \
             Bootstrap {} (the default), or pass --force to accept the loss",
            chosen.name,
            chosen.describe(),
            best.name,
            best.describe(),
            best.name
        );
    }
    Ok(wanted)
}

impl Cluster {
    /// Where each node stands. Fails if a node already is in a primary
    /// component: then there is nothing to bootstrap.
    pub fn bootstrap_candidates(&mut self) -> Result<Vec<Candidate>> {
        let mariadbd = super::find_program("mariadbd")?;
        let mut out = vec![];
        for i in 1..=self.len() {
            let running = self.is_running(i);
            let node = self.node(i).clone();
            let seqno = if running {
                if node.status("wsrep_cluster_status").is_ok_and(|s| s == "Primary") {
                    bail!("{} is in a primary component already: start the other nodes with start-node", node.name);
                }
                node.status("wsrep_last_committed").ok().and_then(|s| s.parse().ok())
            } else {
                match saved_seqno(&node.datadir) {
                    Some(seqno) => Some(seqno),
                    // Only when grastate.dat has none: a recovery starts InnoDB.
                    None => recover_position(&mariadbd, &node)?.and_then(|p| seqno_of(&p)),
                }
            };
            let (log_last, log_note) = if self.state().provider == ProviderKind::Tandem {
                let option = |key: &str| {
                    self.state().provider_options.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.clone())
                };
                group_log_standing(&node.datadir, option)
            } else {
                (None, None)
            };
            out.push(Candidate { index: i, name: node.name.clone(), running, log_last, log_note, seqno });
        }
        Ok(out)
    }

    /// Bootstraps the most advanced node (or `wanted`, see [`choose`]),
    /// waits until it is Synced, then starts the stopped nodes so that they
    /// rejoin, unless `only`.
    pub fn bootstrap(&mut self, wanted: Option<usize>, force: bool, only: bool, timeout: Duration) -> Result<Outcome> {
        let candidates = self.bootstrap_candidates()?;
        let chosen = choose(&candidates, wanted, force)?;
        let in_place = candidates[chosen - 1].running;
        if in_place {
            let node = self.node(chosen).clone();
            node.sql("SET GLOBAL wsrep_provider_options='pc.bootstrap=YES'")
                .with_context(|| format!("{} refused to bootstrap", node.name))?;
        } else {
            self.start_bootstrap(chosen)?;
        }
        self.wait_synced(chosen, timeout)?;
        let mut started = vec![];
        if !only {
            for c in candidates.iter().filter(|c| c.index != chosen) {
                if !c.running {
                    self.start(c.index)?;
                    started.push(c.index);
                }
                self.wait_synced(c.index, timeout)?;
            }
        }
        Ok(Outcome { candidates, chosen, in_place, started })
    }
}

/// How far a node's group log reaches, read without changing it: the
/// (term, index) of its last entry, or why it does not count. `option`
/// gives the provider's `gcache.dir` (relative to the data directory, as the
/// provider reads it) and `gcache.name`. (None, None): no group log.
pub(crate) fn group_log_standing(
    datadir: &Path,
    option: impl Fn(&str) -> Option<String>,
) -> (Option<(u64, u64)>, Option<String>) {
    let dir = option("gcache.dir").map_or_else(|| datadir.to_path_buf(), |d| datadir.join(d));
    let name = option("gcache.name").unwrap_or_else(|| "galera.cache".into());
    match tandem_group::inspect_state(&dir, &name) {
        Ok(Some(summary)) => match summary.untrusted {
            None => (summary.last, None),
            Some(why) => (None, Some(why)),
        },
        Ok(None) => (None, None),
        Err(why) => (None, Some(why)),
    }
}

/// The seqno of `datadir`'s grastate.dat, if it records one (a clean shutdown).
pub(crate) fn saved_seqno(datadir: &Path) -> Option<i64> {
    let text = std::fs::read_to_string(datadir.join("grastate.dat")).ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("seqno:"))?;
    line.trim().parse().ok().filter(|s: &i64| *s >= 0)
}

/// The seqno of "uuid:seqno".
pub(crate) fn seqno_of(position: &str) -> Option<i64> {
    position.rsplit(':').next()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(index: usize, log_last: Option<(u64, u64)>, seqno: Option<i64>) -> Candidate {
        Candidate { index, name: format!("node{index}"), running: false, log_last, log_note: None, seqno }
    }

    #[test]
    fn the_longest_log_wins_then_the_database() {
        let c = [
            candidate(1, Some((2, 100)), Some(90)),
            candidate(2, Some((3, 80)), Some(70)),
            candidate(3, Some((3, 80)), Some(75)),
        ];
        assert_eq!(choose(&c, None, false).unwrap(), 3, "a later term beats a longer log; then the database");
    }

    #[test]
    fn equals_go_to_the_lowest_number() {
        let c = [candidate(1, Some((1, 5)), Some(5)), candidate(2, Some((1, 5)), Some(5))];
        assert_eq!(choose(&c, None, false).unwrap(), 1);
        assert_eq!(choose(&c, Some(2), false).unwrap(), 2, "an equal one may be asked for");
    }

    #[test]
    fn a_less_advanced_node_is_refused_unless_forced() {
        let c = [candidate(1, Some((1, 50)), Some(50)), candidate(2, Some((1, 40)), Some(40))];
        let err = choose(&c, Some(2), false).unwrap_err().to_string();
        assert!(err.contains("node2 is less advanced (log 1/40, seqno 40) than node1 (log 1/50, seqno 50)"), "{err}");
        assert!(err.contains("--force"), "{err}");
        assert_eq!(choose(&c, Some(2), true).unwrap(), 2);
    }

    #[test]
    fn without_logs_the_database_position_decides() {
        let c = [candidate(1, None, Some(7)), candidate(2, None, None), candidate(3, None, Some(9))];
        assert_eq!(choose(&c, None, false).unwrap(), 3);
        assert!(choose(&c, Some(2), false).is_err());
        assert!(choose(&c, Some(4), true).is_err(), "no such node");
    }

    #[test]
    fn grastate_seqno_and_positions_parse() {
        assert_eq!(seqno_of("5febba8e-070e-49bc-a01f-c8c38ec3d1af:2177"), Some(2177));
        assert_eq!(seqno_of("garbage"), None);
    }
}
