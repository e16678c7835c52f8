//! `tandem bench --quick` end to end on one-node clusters: the command the
//! benchmark doc comes from runs, measures every target, and writes a report
//! whose figures are the ones it measured. No figure is judged: timing is the
//! benchmark's business, not a test's.

use std::path::PathBuf;
use std::process::Command;
use tandem::bench::results::Results;
use tandem::cluster::ProviderKind;
use tandem_cluster_tests::provider_path;

/// The release `tandem` next to the provider library under test.
fn tandem_bin() -> PathBuf {
    std::env::var_os("TANDEM_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            provider_path()
                .parent()
                .expect("provider path has a directory")
                .join("tandem")
        })
}

#[test]
fn quick_bench_measures_every_target_and_writes_the_report() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let (doc, json) = (tmp.path().join("bench.md"), tmp.path().join("bench.json"));
    let out = Command::new(tandem_bin())
        // Two short rounds: the rounds path is what the full bench runs.
        .args(["bench", "--quick", "--nodes", "1", "--rounds", "2", "--duration", "3", "--dir"])
        .arg(tmp.path().join("w"))
        .arg("--tandem-path")
        .arg(provider_path())
        .arg("--doc")
        .arg(&doc)
        .arg("--json")
        .arg(&json)
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tandem bench failed:\n{stderr}");

    let results: Results = serde_json::from_str(&std::fs::read_to_string(&json)?)?;
    let targets = [
        ProviderKind::Tandem,
        ProviderKind::Galera,
        ProviderKind::Standalone,
    ];
    assert_eq!(
        results.cells.len(),
        4,
        "2 workloads x 2 thread counts, node 1 only"
    );
    for cell in &results.cells {
        for target in targets {
            let m = cell.of(target).unwrap_or_else(|| {
                panic!("{target} has no successful run of {}", cell.cell.label())
            });
            assert!(
                m.transactions > 0 && m.tps > 0.0,
                "{target} {}: {m:?}",
                cell.cell.label()
            );
            assert!(m.p95_ms.is_some_and(|p| p > 0.0), "{target}: {m:?}");
            assert_eq!(m.rounds, 2, "{target} {}: {m:?}", cell.cell.label());
            assert_eq!(
                m.cert_failures.is_some(),
                target != ProviderKind::Standalone
            );
        }
        assert!(cell.tps_ratio().is_some());
    }
    for target in targets {
        let r = results
            .resources
            .iter()
            .find(|r| r.target == target)
            .expect("resources");
        assert_eq!(r.peak_rss_mib.len(), 1);
        assert!(r.peak_rss_mib[0] > 10.0, "{target}: {r:?}");
        assert!(r.cpu_per_1000().is_some(), "{target}: {r:?}");
    }

    // The report shows what was measured, in the documented table layout.
    let md = std::fs::read_to_string(&doc)?;
    for cell in &results.cells {
        let (t, g) = (
            cell.of(ProviderKind::Tandem).unwrap(),
            cell.of(ProviderKind::Galera).unwrap(),
        );
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
    assert!(
        md.contains("tandem bench --quick --nodes 1"),
        "the report names its command"
    );

    // Every server it started is gone.
    let leftovers = Command::new("pgrep")
        .args(["-f", &tmp.path().display().to_string()])
        .output()?;
    assert!(
        leftovers.stdout.is_empty(),
        "servers left running: {}",
        String::from_utf8_lossy(&leftovers.stdout)
    );
    Ok(())
}
