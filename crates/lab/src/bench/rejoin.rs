//! The rejoin scenario: on each replicated target's loaded cluster, the last
//! node is stopped (SIGTERM, or SIGKILL), node 1 takes write-sets while it
//! is away, and the node is started again and timed until it is Synced. Its
//! error log says whether it caught up by IST or needed an SST.
//!
//! Only the restart is timed: from the start command (which first recovers
//! the data's position with `mariadbd --wsrep-recover`, as `galera_recovery`
//! does under systemd, for both providers) until the node reports
//! `wsrep_local_state_comment = Synced`. Before the node is started again
//! the others have evicted it (`wsrep_cluster_size` one less) and applied
//! every write-set, so the restart competes with nothing.

use super::plan::Workload;
use super::results::{Rejoin, RejoinRun, RejoinVariant};
use super::runner::{self, Bench};
use super::sysbench;
use super::transfer;
use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use std::time::{Duration, Instant};
use tandem::cluster::{process, Cluster, ProviderKind};

/// Client threads writing on node 1 while the node is away.
pub const THREADS: u32 = 16;
/// What the survivors may take to notice a killed node and leave it out of
/// the view (Galera's evs.inactive_timeout is 15 s by default).
const EVICT_TIMEOUT: Duration = Duration::from_secs(120);
/// The time to Synced is read at this resolution.
const POLL: Duration = Duration::from_millis(100);

/// An SST of a large data set on 2 cores takes minutes; a hung node must
/// still not hang the bench, and a small run (the smoke test's 500 writes)
/// must not wait half an hour to say so.
fn sync_timeout(writes: u64, data_mib: Option<f64>) -> Duration {
    // 30 write-sets or 5 MiB of SST a second at worst.
    let sst_s = data_mib.map_or(1500, |mib| (mib / 5.0) as u64);
    Duration::from_secs((300 + writes / 30 + sst_s).min(1800))
}

/// Writing N write-sets at 30 per second at worst (a few hundred is usual).
fn write_timeout(writes: u64) -> Duration {
    Duration::from_secs(120 + writes / 30)
}
const LOG_TAIL_LINES: usize = 30;

/// What to run, from the command line.
#[derive(Clone, Debug)]
pub struct Plan {
    pub writes: u64,
    pub rounds: u32,
    pub downtime_s: u32,
    pub rate: u32,
}

impl Plan {
    pub fn variants(&self) -> Vec<RejoinVariant> {
        let mut v = vec![RejoinVariant::Stop, RejoinVariant::FromNode1, RejoinVariant::Kill];
        if self.downtime_s > 0 {
            v.push(RejoinVariant::Downtime);
        }
        v
    }

    /// Every run in order: variant by variant, a variant's rounds back to
    /// back, the replicated targets swapping who goes first every round.
    pub fn runs(&self, targets: &[ProviderKind]) -> Vec<(RejoinVariant, u32, ProviderKind)> {
        let replicated: Vec<ProviderKind> = targets.iter().copied().filter(|&t| !t.one_node_only()).collect();
        let mut runs = Vec::new();
        for (v, variant) in self.variants().into_iter().enumerate() {
            for round in 0..self.rounds.max(1) {
                let mut order = replicated.clone();
                if (v + round as usize) % 2 == 1 {
                    order.reverse();
                }
                runs.extend(order.into_iter().map(|t| (variant, round, t)));
            }
        }
        runs
    }

    /// Why the scenario cannot run on these clusters, if it cannot.
    pub fn cannot_run(&self, nodes: usize, targets: &[ProviderKind]) -> Option<String> {
        if nodes < 3 {
            return Some(format!(
                "needs 3 or more nodes per cluster (this run has {nodes}): with 2, the one left alone after a kill -9 has no quorum"
            ));
        }
        if !targets.iter().any(|&t| !t.one_node_only()) {
            return Some("no replicated target in this run".into());
        }
        None
    }
}

/// Runs the whole scenario on every replicated cluster.
pub fn run(
    bench: &Bench,
    clusters: &mut [(ProviderKind, Cluster)],
    plan: &Plan,
    nodes: usize,
    progress: &mut Progress,
) -> Rejoin {
    let targets: Vec<ProviderKind> = clusters.iter().map(|c| c.0).collect();
    let mut out = Rejoin {
        writes: plan.writes,
        rounds: plan.rounds,
        threads: THREADS,
        downtime_s: plan.downtime_s,
        rate: plan.rate,
        node: nodes,
        data_mib: None,
        skipped: plan.cannot_run(nodes, &targets),
        runs: Vec::new(),
    };
    if out.skipped.is_some() {
        return out;
    }
    out.data_mib = clusters.iter().find(|c| !c.0.one_node_only()).and_then(|c| data_mib(c.1.node(1)).ok());
    let sync_limit = sync_timeout(plan.writes, out.data_mib);
    // A target whose node did not come back after a failed run: its later runs are not attempted.
    let mut broken: Vec<(ProviderKind, String)> = Vec::new();
    for (variant, round, kind) in plan.runs(&targets) {
        let what = match plan.rounds {
            1 => format!("{kind} rejoin after {}", variant.label()),
            n => format!("{kind} rejoin after {} (round {}/{n})", variant.label(), round + 1),
        };
        progress.start(&what);
        let failed = |error: String| RejoinRun {
            target: Some(kind),
            variant: Some(variant),
            round,
            error: Some(error),
            ..RejoinRun::default()
        };
        let run = if let Some((_, why)) = broken.iter().find(|b| b.0 == kind) {
            failed(format!("not run: {why}"))
        } else {
            let cluster = &mut clusters.iter_mut().find(|c| c.0 == kind).expect("started").1;
            match once(bench, kind, cluster, variant, plan, round, sync_limit) {
                Ok(run) => run,
                Err(e) => {
                    if let Err(again) = restore(kind, cluster, sync_limit) {
                        broken.push((
                            kind,
                            format!("node {nodes} did not come back after an earlier failure: {again:#}"),
                        ));
                    }
                    failed(format!("{e:#}"))
                }
            }
        };
        let outcome = match &run.error {
            None => {
                format!("{what}: {} write-sets, {}, Synced in {:.1} s", run.writes, run.transfer.label(), run.synced_s)
            }
            Some(e) => format!("{what}: FAILED: {e}"),
        };
        progress.finish(&outcome);
        out.runs.push(run);
    }
    out
}

fn once(
    bench: &Bench,
    kind: ProviderKind,
    cluster: &mut Cluster,
    variant: RejoinVariant,
    plan: &Plan,
    round: u32,
    sync_limit: Duration,
) -> Result<RejoinRun> {
    let seed = 1000 + variant as u32 * 10 + round;
    let n = cluster.len();
    runner::wait_ready(kind, cluster, runner::READY_TIMEOUT)?;
    runner::drain(kind, cluster)?;
    let log = cluster.node(n).error_log.clone();
    match variant {
        RejoinVariant::Kill => cluster.kill(n)?,
        RejoinVariant::Stop | RejoinVariant::FromNode1 | RejoinVariant::Downtime => cluster.stop(n)?,
    }
    // What the node logs from here on is its restart.
    let offset = transfer::log_len(&log);
    wait_cluster_size(cluster, n - 1)?;

    let writer = cluster.node(1).clone();
    let (before, bytes_before) = position(&writer)?;
    let target = bench.target(writer.socket.as_path());
    let (args, limit) = match variant {
        RejoinVariant::Downtime => (
            sysbench::steady_args(&target, Workload::OltpWriteOnly, THREADS, plan.rate, plan.downtime_s, seed),
            Duration::from_secs(u64::from(plan.downtime_s) + 120),
        ),
        _ => (
            sysbench::events_args(&target, Workload::OltpWriteOnly, THREADS, plan.writes, seed),
            write_timeout(plan.writes),
        ),
    };
    let sysbench_log =
        bench.logs.join(format!("{kind}-rejoin-{}-round{}.txt", format!("{variant:?}").to_lowercase(), round + 1));
    let wrote = Instant::now();
    let status = runner::wait_or_kill(bench.spawn(&args, &sysbench_log)?, limit)?;
    let write_s = wrote.elapsed().as_secs_f64();
    runner::read_reports(std::slice::from_ref(&sysbench_log), &[status])?;
    runner::drain(kind, cluster)?;
    let (after, bytes_after) = position(&writer)?;

    // Naming a donor is for this start only: the next round's restart asks anyone.
    let donor =
        (variant == RejoinVariant::FromNode1).then(|| ("wsrep_sst_donor".to_string(), cluster.node(1).name.clone()));
    let how = tandem::cluster::Start { server_options: donor.into_iter().collect(), ..Default::default() };
    let started = Instant::now();
    let restarted = cluster.start_with(n, &how).and_then(|()| wait_synced(cluster, n, sync_limit));
    let synced_s = started.elapsed().as_secs_f64();
    restarted?;
    let excerpt = transfer::log_since(&log, offset).with_context(|| format!("reading {}", log.display()))?;
    let decision = transfer::decide(kind, &excerpt);
    // Everyone caught up before the next run; not part of the figure.
    runner::drain(kind, cluster)?;
    Ok(RejoinRun {
        target: Some(kind),
        variant: Some(variant),
        round,
        writes: after.saturating_sub(before),
        write_s,
        write_mib: bytes_after.saturating_sub(bytes_before) as f64 / (1024.0 * 1024.0),
        transfer: decision.transfer,
        evidence: decision.evidence,
        synced_s,
        error: None,
    })
}

/// The size of the sysbench tables on a node (what an SST copies, besides the system tables).
fn data_mib(node: &tandem::cluster::Node) -> Result<f64> {
    let rows = node.sql(
        "SELECT COALESCE(SUM(data_length + index_length), 0) FROM information_schema.TABLES WHERE table_schema = 'sbtest'",
    )?;
    let bytes = rows.first().and_then(|r| r.first()).context("no answer")?;
    Ok(runner::number(bytes)? as f64 / (1024.0 * 1024.0))
}

/// `wsrep_last_committed` and `wsrep_replicated_bytes` of a node.
fn position(node: &tandem::cluster::Node) -> Result<(u64, u64)> {
    let s = node.statuses("wsrep_%")?;
    let get = |k: &str| -> Result<u64> {
        runner::number(s.get(k).map(String::as_str).unwrap_or("missing")).with_context(|| format!("{}: {k}", node.name))
    };
    Ok((get("wsrep_last_committed")?, get("wsrep_replicated_bytes")?))
}

/// Waits until node 1 sees `size` members (the stopped node left the view).
fn wait_cluster_size(cluster: &Cluster, size: usize) -> Result<()> {
    let node = cluster.node(1);
    let start = Instant::now();
    loop {
        let seen = node.status("wsrep_cluster_size").ok();
        if seen.as_deref() == Some(size.to_string().as_str()) {
            return Ok(());
        }
        if start.elapsed() > EVICT_TIMEOUT {
            bail!(
                "{} still reports wsrep_cluster_size {} {} s after a node stopped (expected {size})",
                node.name,
                seen.as_deref().unwrap_or("(no answer)"),
                EVICT_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `Cluster::wait_synced` polls every 500 ms; the restart is timed at 100 ms.
fn wait_synced(cluster: &mut Cluster, i: usize, timeout: Duration) -> Result<()> {
    let start = Instant::now();
    loop {
        if !cluster.is_running(i) {
            let node = cluster.node(i);
            bail!(
                "{} exited before reaching Synced; last {LOG_TAIL_LINES} lines of {}:\n{}",
                node.name,
                node.error_log.display(),
                process::tail(&node.error_log, LOG_TAIL_LINES)
            );
        }
        if cluster.node(i).probe_state().as_deref() == Some("Synced") {
            return Ok(());
        }
        if start.elapsed() > timeout {
            let node = cluster.node(i);
            bail!(
                "{} not Synced after {} s; last {LOG_TAIL_LINES} lines of {}:\n{}",
                node.name,
                timeout.as_secs(),
                node.error_log.display(),
                process::tail(&node.error_log, LOG_TAIL_LINES)
            );
        }
        std::thread::sleep(POLL);
    }
}

/// After a failed run: the node back in the cluster, so the next run (and
/// the 1-node cell) start from a whole cluster.
fn restore(kind: ProviderKind, cluster: &mut Cluster, sync_limit: Duration) -> Result<()> {
    let n = cluster.len();
    if !cluster.is_running(n) {
        // A start that failed may have left a dead pid behind.
        cluster.stop(n)?;
        cluster.start(n)?;
    }
    cluster.wait_synced(n, sync_limit)?;
    runner::wait_ready(kind, cluster, runner::READY_TIMEOUT)?;
    runner::drain(kind, cluster)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProviderKind::*;
    use RejoinVariant::*;

    fn plan(downtime_s: u32, rounds: u32) -> Plan {
        Plan { writes: 2000, rounds, downtime_s, rate: 200 }
    }

    #[test]
    fn variants_and_order() {
        assert_eq!(plan(0, 1).variants(), [Stop, FromNode1, Kill]);
        assert_eq!(plan(5, 1).variants(), [Stop, FromNode1, Kill, Downtime]);
        let runs = plan(5, 2).runs(&[Tandem, Galera, Standalone]);
        assert_eq!(
            runs,
            [
                (Stop, 0, Tandem),
                (Stop, 0, Galera),
                (Stop, 1, Galera),
                (Stop, 1, Tandem),
                (FromNode1, 0, Galera),
                (FromNode1, 0, Tandem),
                (FromNode1, 1, Tandem),
                (FromNode1, 1, Galera),
                (Kill, 0, Tandem),
                (Kill, 0, Galera),
                (Kill, 1, Galera),
                (Kill, 1, Tandem),
                (Downtime, 0, Galera),
                (Downtime, 0, Tandem),
                (Downtime, 1, Tandem),
                (Downtime, 1, Galera),
            ]
        );
        assert_eq!(plan(0, 3).runs(&[Galera]).len(), 9);
    }

    #[test]
    fn needs_three_nodes_and_a_replicated_target() {
        let p = plan(0, 1);
        assert!(p.cannot_run(1, &[Tandem]).unwrap().contains("3 or more nodes"));
        assert!(p.cannot_run(2, &[Tandem]).is_some());
        assert!(p.cannot_run(3, &[Standalone]).unwrap().contains("no replicated target"));
        assert_eq!(p.cannot_run(3, &[Tandem, Standalone]), None);
    }
}
