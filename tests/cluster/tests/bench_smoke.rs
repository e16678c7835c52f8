//! `tandem-lab bench --quick` end to end: on one-node clusters, the command the
//! benchmark doc comes from runs, measures every target, and writes a report
//! whose figures are the ones it measured; on three-node clusters, the
//! rejoin scenario, the 1-node cell and the TLS cell are measured and
//! reported. No figure is judged: timing is the benchmark's business, not a
//! test's.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tandem::cluster::ProviderKind;
use tandem_cluster_tests::{null_provider_path, provider_path};
use tandem_lab::bench::results::{RejoinVariant, Results};
use tandem_lab::bench::transfer::Transfer;

/// The release `tandem-lab` next to the provider library under test (`make
/// build` builds it; the `tandem` beside it runs the SST method).
fn lab_bin() -> PathBuf {
    std::env::var_os("TANDEM_LAB_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| provider_path().parent().expect("provider path has a directory").join("tandem-lab"))
}

#[test]
fn quick_bench_measures_every_target_and_writes_the_report() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let (doc, json) = (tmp.path().join("bench.md"), tmp.path().join("bench.json"));
    let mut bench = Command::new(lab_bin());
    // Two short rounds: the rounds path is what the full bench runs. One
    // thread count: a second one adds CI time (about 75 s), not a path.
    bench
        .args(["bench", "--quick", "--nodes", "1", "--threads", "4", "--rounds", "2", "--duration", "3", "--dir"])
        .arg(tmp.path().join("w"))
        .arg("--tandem-path")
        .arg(provider_path())
        .arg("--null-path")
        .arg(null_provider_path())
        .arg("--doc")
        .arg(&doc)
        .arg("--json")
        .arg(&json);
    run_bench(bench, tmp.path(), Duration::from_secs(15 * 60))?;

    let results: Results = serde_json::from_str(&std::fs::read_to_string(&json)?)?;
    // The default targets: on one-node clusters the null provider runs every cell.
    let targets = [ProviderKind::Tandem, ProviderKind::Galera, ProviderKind::Standalone, ProviderKind::Null];
    assert_eq!(results.cells.len(), 2, "2 workloads x 1 thread count, node 1 only");
    every_target_measured(&results, &targets);

    // The report shows what was measured, in the documented table layout.
    let md = std::fs::read_to_string(&doc)?;
    for cell in &results.cells {
        let (t, g) = (cell.of(ProviderKind::Tandem).unwrap(), cell.of(ProviderKind::Galera).unwrap());
        let row = format!(
            "| node 1 | {} | {:.0} | {:.0} | {:.0} | {:.2} |",
            cell.cell.threads,
            cell.of(ProviderKind::Standalone).unwrap().tps,
            g.tps,
            t.tps,
            cell.tps_ratio().unwrap()
        );
        assert!(md.contains(&row), "missing row {row} in\n{md}");
    }
    assert!(md.contains("tandem-lab bench --quick --nodes 1"), "the report names its command");

    // One node: no node to take away and bring back, and the report says so.
    let rejoin = results.rejoin.as_ref().expect("the rejoin section is on by default");
    assert!(rejoin.runs.is_empty(), "{rejoin:?}");
    assert!(rejoin.skipped.as_deref().is_some_and(|s| s.contains("3 or more nodes")), "{rejoin:?}");
    assert!(
        md.contains("## Rejoin: a node restarted after missing write-sets\n\nNot run: needs 3 or more nodes"),
        "{md}"
    );
    // The 1-node cell runs on the (already) one-node clusters, the standalone
    // server and the null provider, and reports each provider's own cost.
    single_node_measured(&results, &targets, 2);
    own_cost_reported(&results, &md);

    no_server_left(tmp.path())
}

/// Three-node clusters: the rejoin scenario (every variant, on both
/// providers, IST with the gcache the bench sets) and the 1-node cell after
/// the others left. Presence and kind of transfer only, never how long.
#[test]
fn quick_bench_rejoins_a_node_and_shrinks_to_one() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let (doc, json) = (tmp.path().join("bench.md"), tmp.path().join("bench.json"));
    let mut bench = Command::new(lab_bin());
    bench
        .args([
            "bench",
            "--quick",
            "--nodes",
            "3",
            "--targets",
            "tandem,galera,standalone",
            "--workloads",
            "oltp_write_only",
            "--threads",
            "1",
            "--placements",
            "node1",
            "--duration",
            "2",
            "--rejoin-writes",
            "500",
            "--rejoin-downtime",
            "2",
            "--tls-cell",
            "--causal-cell",
            "--fc-cell",
            "--dir",
        ])
        .arg(tmp.path().join("w"))
        .arg("--tandem-path")
        .arg(provider_path())
        .arg("--doc")
        .arg(&doc)
        .arg("--json")
        .arg(&json);
    // About 4 minutes here; CI's whole budget must survive a hang.
    run_bench(bench, tmp.path(), Duration::from_secs(20 * 60))?;

    let results: Results = serde_json::from_str(&std::fs::read_to_string(&json)?)?;
    let rejoin = results.rejoin.as_ref().expect("rejoin section");
    assert_eq!(rejoin.skipped, None);
    assert_eq!(
        results.settings.provider_options,
        [("gcache.size".to_string(), "128M".to_string())],
        "the same gcache for both providers"
    );
    let variants = [RejoinVariant::Stop, RejoinVariant::FromNode1, RejoinVariant::Kill, RejoinVariant::Downtime];
    assert_eq!(rejoin.runs.len(), 2 * variants.len(), "{rejoin:?}");
    for run in &rejoin.runs {
        assert_eq!(run.error, None, "{run:?}");
        // 500 write-sets fit any gcache: an SST here would mean the bench
        // or the provider got the restart wrong.
        assert_eq!(run.transfer, Transfer::Ist, "{run:?}");
        assert!(run.evidence.is_some(), "{run:?}");
        assert!(run.synced_s > 0.0 && run.write_mib > 0.0, "{run:?}");
        if run.variant != Some(RejoinVariant::Downtime) {
            assert!(run.writes >= 500, "{run:?}");
        } else {
            assert!(run.writes > 0, "{run:?}");
        }
    }
    for v in variants {
        assert!(rejoin.ratio(v).is_some(), "{v:?}");
    }
    single_node_measured(&results, &[ProviderKind::Tandem, ProviderKind::Galera, ProviderKind::Standalone], 1);

    let md = std::fs::read_to_string(&doc)?;
    rejoin_rows_shown(&md);
    assert!(md.contains("## 1-node cluster against standalone MariaDB"), "{md}");
    assert!(md.contains("RSS anon + file per node (MiB)"), "{md}");
    tls_cell_measured(&results, &md, &tmp.path().join("w"))?;
    causal_cell_measured(&results, &md);
    fc_cell_measured(&results, &md);
    no_server_left(tmp.path())
}

/// The report has a row for each rejoin variant, both by IST, and
/// Tandem's follower/leader ratio.
fn rejoin_rows_shown(md: &str) {
    for label in ["clean stop", "clean stop, donor node 1", "kill -9", "downtime"] {
        assert!(md.contains(&format!("| {label} | ")) && md.contains("| IST / IST |"), "{label} row in\n{md}");
    }
    assert!(md.contains("takes no longer than IST from the leader: Tandem "), "follower/leader line in\n{md}");
}

/// `--fc-cell`: the slow-node scenario ran on both providers, the writers
/// were paused by the slow node, and the report shows a row for each.
fn fc_cell_measured(results: &Results, md: &str) {
    let c = results.fc_cell.as_ref().expect("--fc-cell was given");
    assert_eq!(c.skipped, None);
    assert_eq!(c.failed(), 0, "{c:?}");
    let section = md.split("## Flow control: a slow node").nth(1).unwrap_or_else(|| panic!("no section in\n{md}"));
    for kind in [ProviderKind::Tandem, ProviderKind::Galera] {
        let run = c.runs.iter().find(|r| r.target == Some(kind)).unwrap_or_else(|| panic!("{kind}: {c:?}"));
        assert!(run.writes_per_s > 0.0 && run.pauses_sent > 0 && run.paused_fraction > 0.0, "{kind}: {run:?}");
        let row = format!("| {kind} | ");
        assert!(section.contains(&row) && !section.contains(&format!("{row}failed")), "{kind} row in\n{md}");
    }
}

/// `--causal-cell`: causal reads on node 2 were measured on both providers
/// while node 1 wrote (Tandem also with reads on the leader's lease), and the
/// report shows them.
fn causal_cell_measured(results: &Results, md: &str) {
    let c = results.causal_cell.as_ref().expect("--causal-cell was given");
    assert_eq!(c.skipped, None);
    assert_eq!(c.failed(), 0, "{c:?}");
    for kind in [ProviderKind::Tandem, ProviderKind::Galera] {
        let reads = c.reads.as_ref().unwrap().of(kind).unwrap_or_else(|| panic!("{kind}: {c:?}"));
        let writes = c.writes.as_ref().unwrap().of(kind).unwrap_or_else(|| panic!("{kind}: {c:?}"));
        assert!(reads.transactions > 0 && writes.transactions > 0, "{kind}: {reads:?} {writes:?}");
        assert!(md.contains(&format!("| {kind} | {:.0} |", reads.tps)), "{kind} row in\n{md}");
    }
    // Tandem also ran with its reads on the leader's lease.
    let lease = c.lease_reads.as_ref().and_then(|r| r.of(ProviderKind::Tandem)).unwrap_or_else(|| panic!("{c:?}"));
    assert!(lease.transactions > 0, "{lease:?}");
    assert!(md.contains(&format!("| tandem, lease reads | {:.0} |", lease.tps)), "lease row in\n{md}");
    assert!(md.contains("## Causal reads"), "{md}");
}

/// `--tls-cell`: a TLS cluster of each provider ran next to the plaintext
/// one, every run of the cell succeeded, and the report shows the ratios.
fn tls_cell_measured(results: &Results, md: &str, dir: &Path) -> anyhow::Result<()> {
    let t = results.tls_cell.as_ref().expect("--tls-cell was given");
    assert_eq!(t.skipped, None);
    assert_eq!(t.failed(), 0, "{t:?}");
    for kind in [ProviderKind::Tandem, ProviderKind::Galera] {
        let ratio = t.tls_ratio(kind).unwrap_or_else(|| panic!("{kind}: {t:?}"));
        let (plain, tls) = (t.plain.as_ref().unwrap().of(kind).unwrap(), t.tls.as_ref().unwrap().of(kind).unwrap());
        let row = format!("| {kind} | {:.0} | {:.0} | {ratio:.2} |", plain.tps, tls.tps);
        assert!(md.contains(&row), "missing row {row} in\n{md}");
    }
    assert!(md.contains("## What TLS costs"), "{md}");
    // The TLS cluster really was one: each Tandem node says so in its log.
    for i in 1..=3 {
        let log = std::fs::read_to_string(dir.join(format!("tandem-tls/node{i}/error.log")))?;
        assert!(log.contains("The group channel is encrypted with TLS"), "tandem-tls node {i}");
        let plain = std::fs::read_to_string(dir.join(format!("tandem/node{i}/error.log")))?;
        assert!(!plain.contains("The group channel is encrypted with TLS"), "tandem node {i} is plaintext");
    }
    Ok(())
}

/// Every target has a successful figure in both cells of the 1-node section.
fn single_node_measured(results: &Results, targets: &[ProviderKind], rounds: usize) {
    let single = results.single_node.as_ref().expect("the 1-node cell is on by default");
    assert_eq!(single.skipped, None);
    assert_eq!(single.cells.len(), 2, "1 and 16 threads");
    for cell in &single.cells {
        for &target in targets {
            let m = cell
                .of(target)
                .unwrap_or_else(|| panic!("{target} has no successful 1-node run of {}: {cell:?}", cell.cell.label()));
            assert!(m.transactions > 0 && m.p95_ms.is_some(), "{target}: {m:?}");
            assert_eq!(m.rounds, rounds, "{target}: {m:?}");
        }
        assert!(cell.tps_vs(ProviderKind::Tandem, ProviderKind::Standalone).is_some());
    }
}

/// Every cell of the matrix has two rounds of each target, and every
/// target its resources.
fn every_target_measured(results: &Results, targets: &[ProviderKind]) {
    for cell in &results.cells {
        for &target in targets {
            let m =
                cell.of(target).unwrap_or_else(|| panic!("{target} has no successful run of {}", cell.cell.label()));
            assert!(m.transactions > 0 && m.tps > 0.0, "{target} {}: {m:?}", cell.cell.label());
            assert!(m.p95_ms.is_some_and(|p| p > 0.0), "{target}: {m:?}");
            assert_eq!(m.rounds, 2, "{target} {}: {m:?}", cell.cell.label());
            assert_eq!(m.cert_failures.is_some(), !target.one_node_only());
        }
        assert!(cell.tps_ratio().is_some());
    }
    for &target in targets {
        let r = results.resources.iter().find(|r| r.target == target).expect("resources");
        assert_eq!(r.peak_rss_mib.len(), 1);
        assert!(r.peak_rss_mib[0] > 10.0, "{target}: {r:?}");
        assert!(r.cpu_per_1000().is_some(), "{target}: {r:?}");
    }
}

/// The 1-node cell's CPU table: every target's CPU per transaction and each
/// provider's own cost against the null provider, as the JSON has them.
fn own_cost_reported(results: &Results, md: &str) {
    assert!(md.contains("## 1-node cluster against standalone MariaDB and the null provider"), "{md}");
    for cell in &results.single_node.as_ref().expect("measured").cells {
        let us = |k| format!("{:.0}", cell.cpu_us_per_trx(k).expect("measured"));
        let own = |k| format!("{:.0}", cell.own_cpu_us_per_trx(k).expect("against the null provider"));
        let (s, n, g, t) = (ProviderKind::Standalone, ProviderKind::Null, ProviderKind::Galera, ProviderKind::Tandem);
        let row = format!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            cell.cell.threads,
            us(s),
            us(n),
            us(g),
            us(t),
            own(g),
            own(t)
        );
        assert!(md.contains(&row), "missing row {row} in\n{md}");
    }
}

/// Every server the bench started is gone.
/// Runs a bench to its end, or kills it and every server it started once
/// `limit` has passed. Its progress lines go to the real stderr as they come
/// (libtest captures only its own prints), so a CI log that ends in a hang
/// still says which step hung, and with the step's elapsed time.
fn run_bench(mut bench: Command, dir: &Path, limit: Duration) -> anyhow::Result<()> {
    let mut child = bench.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn()?;
    let stderr = child.stderr.take().expect("piped");
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let echo = {
        let lines = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = writeln!(std::io::stderr(), "bench | {line}");
                lines.lock().unwrap().push(line);
            }
        })
    };
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            kill_servers_under(dir);
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    if status.is_some() {
        // Past the limit a grandchild could still hold the pipe: no join then.
        let _ = echo.join();
    }
    let said = lines.lock().unwrap().join("\n");
    match status {
        Some(status) => assert!(status.success(), "tandem-lab bench failed ({status}):\n{said}"),
        None => panic!("tandem-lab bench still running after {} s: killed, with its servers\n{said}", limit.as_secs()),
    }
    Ok(())
}

/// The servers a killed bench leaves behind run in their own sessions.
fn kill_servers_under(dir: &Path) {
    let _ = Command::new("pkill").args(["-KILL", "-f", &dir.display().to_string()]).status();
    std::thread::sleep(Duration::from_secs(1));
}

fn no_server_left(dir: &Path) -> anyhow::Result<()> {
    let leftovers = Command::new("pgrep").args(["-f", &dir.display().to_string()]).output()?;
    assert!(leftovers.stdout.is_empty(), "servers left running: {}", String::from_utf8_lossy(&leftovers.stdout));
    Ok(())
}
