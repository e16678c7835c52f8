//! `tandem-lab bench`: sysbench on Tandem, Galera and a standalone MariaDB, side
//! by side in one run, written to `docs/benchmarks.md`.
//!
//! Three parts, in this order on the same loaded clusters: the matrix of
//! cells (`plan`), the rejoin scenario (`rejoin`: a node stopped, write-sets
//! written, the node restarted and timed to Synced, IST or SST read from its
//! log by `transfer`), and the 1-node cell (`single_node`: each cluster
//! shrunk to node 1, against the standalone server). Memory is read after
//! the matrix, before the other two restart and stop nodes.
//!
//! All targets run at the same time (idle while not measured), so a cell's
//! Galera and Tandem runs are minutes apart at most; `plan` alternates them.
//! Every figure in the report comes from this run's measurements; the JSON
//! kept next to it lets the next run report how far the ratios moved.

pub mod causal_cell;
mod environment;
pub mod fc_cell;
pub mod options;
pub mod plan;
pub mod procfs;
pub mod rejoin;
pub mod rejoin_results;
pub mod report;
pub mod results;
pub(crate) mod runner;
pub mod single_node;
pub mod sst_cell;
pub mod stream_cell;
pub mod sysbench;
pub mod tls_cell;
pub mod transfer;

use crate::progress::{clock, Progress};
use anyhow::{bail, Context, Result};
pub use options::BenchArgs;
use options::{sizes, Sizes};
use results::{CellResult, Resources, Results, Settings};
use runner::Bench;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tandem::cluster::prereq::{find_program, workspace_root};
use tandem::cluster::{self, Cluster, ClusterSpec, ProviderKind};

pub fn run(args: BenchArgs) -> Result<()> {
    if let Some(from) = &args.render_from {
        return render_again(&args, from);
    }
    let sizes = sizes(&args)?;
    let sysbench =
        find_program("sysbench").context("the benchmark drives sysbench (apt-get install sysbench, or make deps)")?;
    cluster::prereq::Tools::find()?;
    let paths = target_paths(&args, &sizes.matrix.targets)?;
    let (doc, json) = output_paths(&args);
    std::fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
    let dir = std::fs::canonicalize(&args.dir)?;
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    let previous = read_previous(&json);

    let started = Instant::now();
    let date = environment::utc_now();
    let mysqld_options = server_options(&args);
    let runs = if args.no_matrix { Vec::new() } else { sizes.matrix.runs() };
    let rejoin_runs = sizes.rejoin.as_ref().map_or(0, |p| {
        if p.cannot_run(sizes.matrix.nodes, &sizes.matrix.targets).is_some() {
            0
        } else {
            p.runs(&sizes.matrix.targets).len()
        }
    });
    let single_runs = if args.no_single_node {
        0
    } else {
        single_node::matrix(&sizes.matrix.targets, sizes.matrix.rounds).runs().len()
    };
    let tls_kinds: Vec<ProviderKind> = if args.tls_cell {
        sizes.matrix.targets.iter().copied().filter(|&k| !k.one_node_only()).collect()
    } else {
        Vec::new()
    };
    let tls_runs = if tls_kinds.is_empty() { 0 } else { tls_cell::runs(&tls_kinds, sizes.matrix.rounds).len() };
    let causal_runs = if args.causal_cell {
        let replicated: Vec<ProviderKind> =
            sizes.matrix.targets.iter().copied().filter(|&k| !k.one_node_only()).collect();
        causal_cell::runs(&replicated, sizes.matrix.rounds).len()
    } else {
        0
    };
    let fc_runs = if args.fc_cell {
        let replicated: Vec<ProviderKind> =
            sizes.matrix.targets.iter().copied().filter(|&k| !k.one_node_only()).collect();
        fc_cell::runs(&replicated, sizes.matrix.rounds).len()
    } else {
        0
    };
    let stream_runs = if args.stream_cell {
        let replicated: Vec<ProviderKind> =
            sizes.matrix.targets.iter().copied().filter(|&k| !k.one_node_only()).collect();
        stream_cell::runs(&replicated, sizes.matrix.rounds).len()
    } else {
        0
    };
    let sst_runs = if args.sst_cell { 1 + sst_cell::runs(sizes.matrix.rounds).len() } else { 0 };
    let mut progress = Progress::new(
        sizes.matrix.targets.len()
            + sst_runs
            + stream_runs
            + tls_kinds.len()
            + runs.len()
            + rejoin_runs
            + single_runs
            + tls_runs
            + causal_runs
            + fc_runs,
    );
    let mut clusters = start_targets(&args, &sizes, &paths, &mysqld_options, &dir, &mut progress)?;
    let bench = Bench {
        sysbench: &sysbench,
        data: sizes.data,
        warmup_s: sizes.warmup_s,
        duration_s: sizes.duration_s,
        logs: &logs,
    };
    for (kind, cluster) in &clusters {
        progress.start(&format!("{kind}: loading {} x {} rows", bench.data.tables, bench.data.table_size));
        bench.load(*kind, cluster)?;
    }

    let cells = if args.no_matrix { Vec::new() } else { sizes.matrix.cells() };
    let mut results: Vec<CellResult> = cells.iter().map(|&cell| CellResult { cell, runs: Vec::new() }).collect();
    for run in &runs {
        let cell = &cells[run.cell];
        let what = match sizes.matrix.rounds {
            1 => format!("{} {}", run.target, cell.label()),
            n => format!("{} {} (round {}/{n})", run.target, cell.label(), run.round + 1),
        };
        progress.start(&what);
        let cluster = &clusters.iter().find(|(k, _)| *k == run.target).expect("started").1;
        // The same seed for every target within a round, another one per round.
        let seed = (run.cell as u32 + 1) * 10 + run.round;
        let m = bench.measure(run.target, cluster, cell, run.round, seed);
        let outcome = match &m.error {
            None => format!("{what}: {:.0} tps", m.tps),
            Some(e) => format!("{what}: FAILED: {e}"),
        };
        progress.finish(&outcome);
        results[run.cell].runs.push(m);
    }

    let mut out = Results {
        format: results::FORMAT,
        date,
        command: command_line(),
        machine: environment::machine(),
        versions: environment::versions(&sysbench, paths.tandem.as_deref()),
        settings: Settings {
            matrix: sizes.matrix.clone(),
            tables: bench.data.tables,
            table_size: bench.data.table_size,
            warmup_s: bench.warmup_s,
            duration_s: bench.duration_s,
            slave_threads: args.slave_threads,
            mysqld_options: mysqld_options.clone(),
            provider_options: sizes.provider_options.clone(),
            tandem_options: args.tandem_options.clone(),
            tls: args.tls,
            tandem_flow_control: true,
        },
        cells: results,
        resources: Vec::new(),
        elapsed_s: 0.0,
        rejoin: None,
        single_node: None,
        tls_cell: None,
        causal_cell: None,
        fc_cell: None,
        stream_cell: None,
        sst_cell: None,
    };
    // Before the rejoin scenario restarts nodes (a restart resets the peak)
    // and the 1-node cell stops them.
    for (kind, cluster) in &clusters {
        let (cpu_s, transactions) = out.totals(*kind);
        let memory = runner::memory(cluster)?;
        out.resources.push(Resources {
            target: *kind,
            peak_rss_mib: memory.peak,
            rss_anon_mib: memory.anon,
            rss_file_mib: memory.file,
            cpu_s,
            transactions,
        });
    }
    // Before the rejoin and the 1-node cell change the plaintext clusters.
    if !tls_kinds.is_empty() {
        let cell = measure_tls_cell(&args, &sizes, &paths, &mysqld_options, &dir, &bench, &clusters, &mut progress);
        out.tls_cell = Some(cell);
    }
    if args.causal_cell {
        let causal_logs = logs.join("causal-cell");
        std::fs::create_dir_all(&causal_logs)?;
        let causal_bench = Bench { logs: &causal_logs, ..bench };
        out.causal_cell = Some(causal_cell::run(&causal_bench, &clusters, sizes.matrix.rounds, &mut progress));
    }
    if args.fc_cell {
        out.fc_cell = Some(fc_cell::run(&bench, &clusters, sizes.matrix.rounds, &mut progress));
    }
    if args.stream_cell {
        let size_mib = args.stream_mib.unwrap_or(if args.quick { 10 } else { 100 });
        out.stream_cell = Some(stream_cell::run(&bench, &clusters, size_mib, sizes.matrix.rounds, &mut progress));
    }
    if args.sst_cell {
        let gib = args.sst_gib.unwrap_or(if args.quick { 0.1 } else { 2.0 });
        let spec = ClusterSpec {
            provider_path: paths.tandem.clone(),
            slave_threads: args.slave_threads,
            mysqld_options: [mysqld_options.clone(), vec![("wsrep_sst_method".into(), "tandem".into())]].concat(),
            provider_options: [sizes.provider_options.clone(), args.tandem_options.clone()].concat(),
            ..ClusterSpec::new(dir.join("sst-cell"), 2, ProviderKind::Tandem)
        };
        out.sst_cell = Some(sst_cell::run(&bench, spec, gib, sizes.matrix.rounds, &mut progress));
    }
    if let Some(plan) = &sizes.rejoin {
        out.rejoin = Some(rejoin::run(&bench, &mut clusters, plan, sizes.matrix.nodes, &mut progress));
    }
    if !args.no_single_node {
        let single_logs = logs.join("single-node");
        std::fs::create_dir_all(&single_logs)?;
        let single_bench = Bench { logs: &single_logs, ..bench };
        out.single_node = Some(single_node::run(&single_bench, &mut clusters, sizes.matrix.rounds, &mut progress));
    }
    out.elapsed_s = started.elapsed().as_secs_f64();
    drop(clusters); // stops every server before the report claims we are done
    progress.clear();
    write_outputs(&out, previous.as_ref(), &doc, &json)?;
    let failed = out.cells.iter().flat_map(|c| &c.runs).filter(|m| m.error.is_some()).count()
        + out.rejoin.as_ref().map_or(0, |r| r.failed())
        + out.single_node.as_ref().map_or(0, |s| s.failed())
        + out.tls_cell.as_ref().map_or(0, |t| t.failed())
        + out.causal_cell.as_ref().map_or(0, |c| c.failed())
        + out.fc_cell.as_ref().map_or(0, |c| c.failed())
        + out.stream_cell.as_ref().map_or(0, |c| c.failed())
        + out.sst_cell.as_ref().map_or(0, |c| c.failed());
    let all_runs = runs.len() + rejoin_runs + single_runs + tls_runs + causal_runs + fc_runs + stream_runs + sst_runs;
    let _ = std::io::Write::write_all(
        &mut std::io::stdout(),
        format!(
            "benchmark done in {}: {} runs, {failed} failed; report {}, data {}\n",
            clock(started.elapsed()),
            all_runs,
            doc.display(),
            json.display()
        )
        .as_bytes(),
    );
    if failed > 0 {
        bail!("{failed} run(s) failed: see the report and the sysbench logs in {}", logs.display());
    }
    Ok(())
}

struct TargetPaths {
    tandem: Option<PathBuf>,
    galera: Option<PathBuf>,
    null: Option<PathBuf>,
}

/// Checks every provider library before anything starts, so a missing one
/// is a message now rather than a failure twenty minutes in.
fn target_paths(args: &BenchArgs, targets: &[ProviderKind]) -> Result<TargetPaths> {
    let resolve = |kind, explicit: &Option<PathBuf>| -> Result<Option<PathBuf>> {
        if targets.contains(&kind) {
            cluster::prereq::resolve_provider(kind, explicit.as_deref()).map(Some)
        } else {
            Ok(None)
        }
    };
    Ok(TargetPaths {
        tandem: resolve(ProviderKind::Tandem, &args.tandem_path)?,
        galera: resolve(ProviderKind::Galera, &args.galera_path)?,
        null: resolve(ProviderKind::Null, &args.null_path)?,
    })
}

fn output_paths(args: &BenchArgs) -> (PathBuf, PathBuf) {
    let doc = args.doc.clone().unwrap_or_else(|| {
        if args.quick {
            args.dir.join("benchmarks.md")
        } else {
            let root = workspace_root().unwrap_or_else(|| PathBuf::from("."));
            root.join("docs/benchmarks.md")
        }
    });
    let json = args.json.clone().unwrap_or_else(|| doc.with_extension("json"));
    (doc, json)
}

/// `--render-from`: the Markdown report from kept results; the JSON is not touched.
fn render_again(args: &BenchArgs, from: &Path) -> Result<()> {
    let read = |path: &Path| -> Result<Results> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not the JSON results of a tandem-lab bench run", path.display()))
    };
    let results = read(from)?;
    let previous = args.compare_with.as_deref().map(read).transpose()?;
    let (doc, _) = output_paths(args);
    let elsewhere = reports_beside(&doc, from);
    std::fs::write(&doc, report::render_with(&results, previous.as_ref(), &elsewhere))
        .with_context(|| format!("writing {}", doc.display()))?;
    println!("wrote {}", doc.display());
    Ok(())
}

/// The other reports kept in the report's folder: each `benchmarks*.json`
/// with a Markdown report of the same name, except `json` itself (the
/// results being rendered). Unreadable ones are left out: they only point
/// the reader elsewhere.
fn reports_beside(doc: &Path, json: &Path) -> Vec<(String, Results)> {
    let dir = doc.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let this = json.canonicalize().ok();
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("benchmarks") && name.ends_with(".json")
        })
        .filter(|p| p.canonicalize().ok() != this && p.with_extension("md") != doc && p.with_extension("md").exists())
        .filter_map(|p| {
            let name = p.with_extension("md").file_name()?.to_str()?.to_string();
            Some((name, read_previous(&p)?))
        })
        .collect()
}

fn read_previous(json: &Path) -> Option<Results> {
    let text = std::fs::read_to_string(json).ok()?;
    serde_json::from_str(&text).ok()
}

/// The same server settings for every target; only wsrep differs.
fn server_options(args: &BenchArgs) -> Vec<(String, String)> {
    let mut options = vec![
        ("innodb_buffer_pool_size".to_string(), args.buffer_pool.clone()),
        // Durability comes from the cluster; the usual Galera setting, and it
        // keeps the disk's fsync rate from hiding the replication cost.
        ("innodb_flush_log_at_trx_commit".to_string(), "2".to_string()),
        ("max_connections".to_string(), "300".to_string()),
    ];
    for (k, v) in &args.extra_options {
        cluster::config::set_option(&mut options, k, v);
    }
    options
}

fn start_targets(
    args: &BenchArgs,
    sizes: &Sizes,
    paths: &TargetPaths,
    mysqld_options: &[(String, String)],
    dir: &Path,
    progress: &mut Progress,
) -> Result<Vec<(ProviderKind, Cluster)>> {
    let mut clusters = Vec::new();
    for &kind in &sizes.matrix.targets {
        let tls = args.tls && !kind.one_node_only();
        clusters.push((kind, start_target(args, sizes, paths, mysqld_options, dir, kind, tls, progress)?));
    }
    Ok(clusters)
}

/// One target's cluster, in `dir/<kind>` (`dir/<kind>-tls` for the TLS cell's).
#[allow(clippy::too_many_arguments)]
fn start_target(
    args: &BenchArgs,
    sizes: &Sizes,
    paths: &TargetPaths,
    mysqld_options: &[(String, String)],
    dir: &Path,
    kind: ProviderKind,
    tls: bool,
    progress: &mut Progress,
) -> Result<Cluster> {
    let (nodes, path) = match kind {
        ProviderKind::Tandem => (sizes.matrix.nodes, paths.tandem.clone()),
        ProviderKind::Galera => (sizes.matrix.nodes, paths.galera.clone()),
        ProviderKind::Standalone => (1, None),
        ProviderKind::Null => (1, paths.null.clone()),
    };
    let provider_options = match kind {
        ProviderKind::Standalone | ProviderKind::Null => Vec::new(),
        ProviderKind::Tandem => [sizes.provider_options.clone(), args.tandem_options.clone()].concat(),
        ProviderKind::Galera => sizes.provider_options.clone(),
    };
    let name = if tls && args.tls_cell { format!("{kind}-tls") } else { kind.to_string() };
    let spec = ClusterSpec {
        provider_path: path,
        slave_threads: args.slave_threads,
        mysqld_options: mysqld_options.to_vec(),
        provider_options,
        tls,
        ..ClusterSpec::new(dir.join(&name), nodes, kind)
    };
    progress.start(&format!("{name}: starting {nodes} node(s)"));
    let took = Instant::now();
    let cluster = Cluster::up(spec).with_context(|| format!("starting the {name} target"))?;
    progress.finish(&format!("{name}: {nodes} node(s) up in {:.0} s", took.elapsed().as_secs_f64()));
    Ok(cluster)
}

/// Starts a TLS cluster of each replicated target, loads it, measures the
/// TLS cell against the matrix's plaintext clusters, and stops it again.
#[allow(clippy::too_many_arguments)]
fn measure_tls_cell(
    args: &BenchArgs,
    sizes: &Sizes,
    paths: &TargetPaths,
    mysqld_options: &[(String, String)],
    dir: &Path,
    bench: &Bench,
    plain: &[(ProviderKind, Cluster)],
    progress: &mut Progress,
) -> tls_cell::TlsCell {
    let mut tls = Vec::new();
    for &(kind, _) in plain.iter().filter(|c| !c.0.one_node_only()) {
        let started = start_target(args, sizes, paths, mysqld_options, dir, kind, true, progress).and_then(|cluster| {
            progress.start(&format!("{kind}-tls: loading {} x {} rows", bench.data.tables, bench.data.table_size));
            bench.load(kind, &cluster)?;
            Ok(cluster)
        });
        match started {
            Ok(cluster) => tls.push((kind, cluster)),
            Err(e) => {
                return tls_cell::TlsCell {
                    skipped: Some(format!("the {kind} TLS cluster: {e:#}")),
                    ..tls_cell::TlsCell::default()
                }
            }
        }
    }
    let logs = bench.logs.join("tls-cell");
    if let Err(e) = std::fs::create_dir_all(&logs) {
        return tls_cell::TlsCell { skipped: Some(format!("{}: {e}", logs.display())), ..Default::default() };
    }
    let cell_bench = Bench { logs: &logs, ..*bench };
    tls_cell::run(&cell_bench, plain, &tls, sizes.matrix.rounds, progress)
    // `tls` drops here: its servers stop before the next scenario.
}

fn write_outputs(out: &Results, previous: Option<&Results>, doc: &Path, json: &Path) -> Result<()> {
    for path in [doc, json] {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
    }
    let text = serde_json::to_string_pretty(out)?;
    std::fs::write(json, text + "\n").with_context(|| format!("writing {}", json.display()))?;
    let elsewhere = reports_beside(doc, json);
    std::fs::write(doc, report::render_with(out, previous, &elsewhere))
        .with_context(|| format!("writing {}", doc.display()))
}

/// How the user invoked us, program name shortened to `tandem-lab`.
fn command_line() -> String {
    let mut words: Vec<String> = std::env::args().skip(1).collect();
    words.insert(0, "tandem-lab".into());
    words
        .iter()
        .map(|w| {
            if w.chars().all(|c| c.is_ascii_alphanumeric() || "-_=./,:".contains(c)) {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use options::tests::args;

    #[test]
    fn render_from_rewrites_the_report_and_leaves_the_results() {
        let dir = tempfile::tempdir().unwrap();
        let (now, before, doc) = (dir.path().join("now.json"), dir.path().join("before.json"), dir.path().join("b.md"));
        let write = |path: &Path, r: &Results| std::fs::write(path, serde_json::to_string(r).unwrap()).unwrap();
        write(&now, &results::tests::sample([132.0, 80.0]));
        write(&before, &results::tests::sample([120.0, 80.0]));
        let path = |p: &Path| p.to_str().unwrap().to_string();
        let (now_s, before_s, doc_s) = (path(&now), path(&before), path(&doc));
        run(args(&["--render-from", &now_s, "--compare-with", &before_s, "--doc", &doc_s])).unwrap();
        let md = std::fs::read_to_string(&doc).unwrap();
        assert!(md.contains("| node 1 | 1 | 400 | 100 | 132 | 1.32 |"), "{md}");
        assert!(md.contains("2 of 2 cells stayed within ±15%"), "{md}");
        assert!(!dir.path().join("b.json").exists(), "no results written");

        run(args(&["--render-from", &now_s, "--doc", &doc_s])).unwrap();
        assert!(std::fs::read_to_string(&doc).unwrap().contains("No earlier run"));

        let err = run(args(&["--render-from", &doc_s, "--doc", &doc_s])).unwrap_err();
        assert!(format!("{err:#}").contains("is not the JSON results of a tandem-lab bench run"), "{err:#}");
    }

    #[test]
    fn a_report_lists_the_reports_of_other_machines_kept_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        let write = |name: &str, r: &Results| {
            std::fs::write(at(name), serde_json::to_string(r).unwrap()).unwrap();
            std::fs::write(at(name).with_extension("md"), "report").unwrap();
        };
        let here = results::tests::sample([132.0, 80.0]);
        let mut big = here.clone();
        big.machine.cores = 16;
        big.machine.kernel = "6.18-gpu".into();
        write("benchmarks.json", &here);
        write("benchmarks-16core.json", &big);
        write("benchmarks-sst.json", &here); // the same machine: not listed
        std::fs::write(at("benchmarks-broken.json"), "{").unwrap();
        std::fs::write(at("benchmarks-broken.md"), "report").unwrap();
        let doc = at("benchmarks.md");
        let (json_s, doc_s) = (at("benchmarks.json").to_str().unwrap().to_string(), doc.to_str().unwrap().to_string());
        run(args(&["--render-from", &json_s, "--doc", &doc_s])).unwrap();
        let md = std::fs::read_to_string(&doc).unwrap();
        assert!(md.contains("Also measured on other machines"), "{md}");
        assert!(md.contains("| [benchmarks-16core.md](benchmarks-16core.md) | 16 cores"), "{md}");
        assert!(!md.contains("benchmarks-sst.md"), "{md}");
        assert!(!md.contains("benchmarks-broken.md"), "{md}");

        // Rendered alone, or beside the same machine only, there is no such section.
        std::fs::remove_file(at("benchmarks-16core.json")).unwrap();
        run(args(&["--render-from", &json_s, "--doc", &doc_s])).unwrap();
        assert!(!std::fs::read_to_string(&doc).unwrap().contains("other machines"));
    }
}
