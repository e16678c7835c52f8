//! The report's rejoin section: a node restarted after missing write-sets,
//! how it caught up (IST or SST) and how long until Synced.

use super::{ratio, round_label_of};
use crate::bench::results::{Rejoin, RejoinSummary, RejoinVariant, Results};
use std::fmt::Write;
use tandem::cluster::ProviderKind;

pub(super) fn rejoin_section(out: &mut String, r: &Results, j: &Rejoin) {
    let _ = writeln!(out, "## Rejoin: a node restarted after missing write-sets\n");
    if let Some(why) = &j.skipped {
        let _ = writeln!(out, "Not run: {why}.\n");
        return;
    }
    let gcache = r
        .settings
        .provider_options
        .iter()
        .find(|(k, _)| k == "gcache.size")
        .map_or("the providers' default `gcache.size`".to_string(), |(k, v)| format!("`{k}={v}`"));
    let data = j.data_mib.map_or(String::new(), |m| format!(", {m:.0} MiB of InnoDB data and indexes"));
    let _ = writeln!(
        out,
        "After the matrix, on each replicated cluster in turn: node {n} is stopped, node 1 takes `oltp_write_only`\n\
         from {t} sysbench threads while it is away, then node {n} is started again and timed from the start command\n\
         until it reports `wsrep_local_state_comment = Synced`. Data set: {tables} tables x {rows} rows{data}.\n",
        n = j.node,
        t = j.threads,
        tables = r.settings.tables,
        rows = r.settings.table_size,
    );
    variant_bullets(out, j);
    if j.downtime_s > 0 {
        let _ = writeln!(
            out,
            "* **downtime**: SIGTERM, then {} s of steady load at {} transactions per second (sysbench `--rate`), so both\n  \
             providers get the same number of write-sets.",
            j.downtime_s, j.rate
        );
    }
    let _ = writeln!(
        out,
        "\nBefore the restart the other nodes have left node {n} out of the view and applied every write-set, so the\n\
         restart competes with nothing. The start command first recovers the data's position with\n\
         `mariadbd --wsrep-recover` (as `galera_recovery` does under systemd), for both providers. Both run with\n\
         {gcache}: an IST needs the donor to still hold every write-set the node missed (*MiB* is what node 1\n\
         replicated meanwhile, `wsrep_replicated_bytes`).\n",
        n = j.node
    );
    out.push_str(TRANSFER_RULES);
    let _ = writeln!(
        out,
        "| Variant | Write-sets G / T | MiB G / T | Transfer G / T | Galera s to Synced | Tandem s to Synced | T/G | rounds ± G / T |"
    );
    let _ = writeln!(out, "|---|---:|---:|---|---:|---:|---:|---:|");
    for v in j.variants() {
        let g = j.summary(ProviderKind::Galera, v);
        let t = j.summary(ProviderKind::Tandem, v);
        let ran = |k| j.ran(k, v);
        let _ = writeln!(
            out,
            "| {} | {} / {} | {} / {} | {} / {} | {} | {} | {} | {} / {} |",
            v.label(),
            opt(&g, |s| format!("{:.0}", s.writes)),
            opt(&t, |s| format!("{:.0}", s.writes)),
            opt(&g, |s| format!("{:.1}", s.write_mib)),
            opt(&t, |s| format!("{:.1}", s.write_mib)),
            transfers(&g, ran(ProviderKind::Galera)),
            transfers(&t, ran(ProviderKind::Tandem)),
            synced(&g, ran(ProviderKind::Galera)),
            synced(&t, ran(ProviderKind::Tandem)),
            ratio(j.ratio(v)),
            opt(&g, rejoin_spread),
            opt(&t, rejoin_spread),
        );
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "*s to Synced*: the median of the rounds, (lowest–highest) when there were several; *T/G* below 1 means\n\
         Tandem was back sooner. A figure is only comparable when both did the same kind of transfer.\n"
    );
    let mut listed = false;
    for run in &j.runs {
        if let (Some(target), Some(variant), Some(e)) = (run.target, run.variant, &run.error) {
            let round = round_label_of(j.rounds, run.round);
            let _ = writeln!(out, "* {target}, rejoin after {}{round}: **failed**: {e}", variant.label());
            listed = true;
        }
    }
    if listed {
        out.push('\n');
    }
    targets_note(out, r, j);
}

/// What the write-set variants are (the donor-node-1 one when it ran).
fn variant_bullets(out: &mut String, j: &Rejoin) {
    let _ = writeln!(
        out,
        "* **clean stop**: SIGTERM, then {w} write-sets (sysbench `--events={w}`: one transaction, one write-set each).\n\
         * **kill -9**: SIGKILL, then the same.",
        w = j.writes
    );
    if j.variants().contains(&RejoinVariant::FromNode1) {
        let _ = writeln!(
            out,
            "* **clean stop, donor node 1**: the same as a clean stop, restarted with `wsrep_sst_donor` naming node 1.\n  \
             Galera then takes its IST from node 1. On Tandem node 1 is the leader, so no catch-up is fetched and\n  \
             the leader's Raft sends the log; after a plain clean stop, Tandem first catches its log up from a\n  \
             follower, node 2 (docs/durability.md, \"IST from any member\")."
        );
    }
}

/// The targets next to this run's figures, reported, not asserted.
fn targets_note(out: &mut String, r: &Results, j: &Rejoin) {
    let _ = writeln!(out, "The issue's targets (reported here, never asserted):\n");
    let ist_ratio: Vec<String> = [RejoinVariant::Stop, RejoinVariant::Kill]
        .into_iter()
        .filter_map(|v| Some(format!("{} {:.2}", v.label(), j.ratio(v)?)))
        .collect();
    let measured = if ist_ratio.is_empty() { "no ratio in this run".to_string() } else { ist_ratio.join(", ") };
    let _ = writeln!(
        out,
        "* IST of 100000 `oltp_write_only` write-sets in at most 0.5x Galera's time: this run wrote {} per\n  \
         restart; T/G {measured}.",
        j.writes
    );
    let from_leader = match (
        j.summary(ProviderKind::Tandem, RejoinVariant::Stop),
        j.summary(ProviderKind::Tandem, RejoinVariant::FromNode1),
    ) {
        (Some(follower), Some(leader)) if leader.synced_s > 0.0 => format!(
            "Tandem {:.1} s from a follower (clean stop), {:.1} s from the leader (donor node 1): {:.2}x",
            follower.synced_s,
            leader.synced_s,
            follower.synced_s / leader.synced_s
        ),
        _ => "not run".to_string(),
    };
    let _ = writeln!(
        out,
        "* IST from a member other than the leader takes no longer than IST from the leader: {from_leader}."
    );
    let downtime = j
        .summary(ProviderKind::Tandem, RejoinVariant::Downtime)
        .map_or("not run".to_string(), |s| format!("Tandem {} in {:.1} s here", s.transfers(), s.synced_s));
    let _ = writeln!(
        out,
        "* A restart after 1 minute of downtime on a 2 GB data set takes seconds, not an SST: the downtime variant\n  \
         ({downtime}, on {} tables x {} rows). For the 2 GB data set (8 x 1000000 rows) run\n  \
         `{}`.\n",
        r.settings.tables, r.settings.table_size, LARGE_REJOIN
    );
}

/// The rejoin scenario alone on the 2 GB data set of the issue.
pub const LARGE_REJOIN: &str = "tandem-lab bench --no-matrix --no-single-node --targets tandem,galera --tables 8 --table-size 1000000 --rejoin-rounds 1 --doc .tandem/bench-rejoin-2g.md";

const TRANSFER_RULES: &str = "\
IST or SST is read from the restarted node's error log, from its start command on (`crates/lab/src/bench/transfer.rs`):
an SST if the joiner side of the SST script logged `WSREP_SST: [INFO] Proceeding with SST` (the donor streams a full
backup), or, for Tandem, if the provider logged `State transfer from <donor> requested` / `falling back to a full
state transfer` / `full state transfer (SST)` (like Galera it runs the script for an IST too, in bypass mode: its
IST handshake); otherwise an IST if Tandem logged
`Resuming at local seqno` or Galera logged `Receiving IST:` / `IST received:` or its script
`'xtrabackup_ist' received from donor: Running IST` (the donor ran with `--bypass`); else `?`. MariaDB's own
`WSREP: SST received` follows the script in both cases and decides nothing.

";

fn opt(s: &Option<RejoinSummary>, f: impl Fn(&RejoinSummary) -> String) -> String {
    s.as_ref().map_or("–".into(), f)
}

fn transfers(s: &Option<RejoinSummary>, ran: bool) -> String {
    match s {
        Some(s) => s.transfers(),
        None if ran => "failed".into(),
        None => "–".into(),
    }
}

fn synced(s: &Option<RejoinSummary>, ran: bool) -> String {
    match s {
        Some(s) if s.rounds > 1 => format!("{:.1} ({:.1}–{:.1})", s.synced_s, s.synced_min_s, s.synced_max_s),
        Some(s) => format!("{:.1}", s.synced_s),
        None if ran => "failed".into(),
        None => "–".into(),
    }
}

fn rejoin_spread(s: &RejoinSummary) -> String {
    if s.rounds > 1 {
        format!("{:.0}%", s.spread_pct)
    } else {
        "–".into()
    }
}
