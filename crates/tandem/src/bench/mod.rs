//! `tandem bench`: sysbench on Tandem, Galera and a standalone MariaDB, side
//! by side in one run, written to `docs/benchmarks.md`.
//!
//! All targets run at the same time (idle while not measured), so a cell's
//! Galera and Tandem runs are minutes apart at most; `plan` alternates them.
//! Every figure in the report comes from this run's measurements; the JSON
//! kept next to it lets the next run report how far the ratios moved.

mod environment;
pub mod plan;
pub mod procfs;
pub mod report;
pub mod results;
mod runner;
pub mod sysbench;

use crate::cluster::prereq::{find_program, workspace_root};
use crate::cluster::{self, Cluster, ClusterSpec, ProviderKind};
use crate::progress::{clock, Progress};
use anyhow::{bail, Context, Result};
use plan::{Matrix, Placement, Workload};
use results::{CellResult, Resources, Results, Settings};
use runner::{Bench, DataSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Smoke size, a few minutes: 2 tables x 10k rows, oltp_write_only and
    /// oltp_point_select, 1 and 8 threads, 5 s runs; report under --dir
    #[arg(long)]
    quick: bool,
    /// Nodes per replicated cluster
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=9))]
    nodes: u16,
    /// Comma-separated [default: all four]
    #[arg(long, value_enum, value_delimiter = ',')]
    workloads: Option<Vec<Workload>>,
    /// Client threads per run, comma-separated [default: 1,4,16,64]
    #[arg(long, value_delimiter = ',')]
    threads: Option<Vec<u32>>,
    /// Where the clients connect, comma-separated [default: node1,spread]
    #[arg(long, value_enum, value_delimiter = ',')]
    placements: Option<Vec<Placement>>,
    /// What to measure, comma-separated
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "tandem,galera,standalone"
    )]
    targets: Vec<ProviderKind>,
    /// sysbench tables [default: 8]
    #[arg(long)]
    tables: Option<u32>,
    /// Rows per table [default: 100000]
    #[arg(long)]
    table_size: Option<u32>,
    /// Measured seconds per run [default: 6]
    #[arg(long)]
    duration: Option<u32>,
    /// Seconds per run before measuring starts [default: 2]
    #[arg(long)]
    warmup: Option<u32>,
    /// Runs of every cell on every target; the report takes each target's
    /// median round [default: 3; with --quick: 1]
    #[arg(long)]
    rounds: Option<u32>,
    /// innodb_buffer_pool_size of every server (the data set fits in it)
    #[arg(long, default_value = "512M")]
    buffer_pool: String,
    /// wsrep_slave_threads of every replicated node
    #[arg(long, default_value_t = cluster::DEFAULT_SLAVE_THREADS)]
    slave_threads: usize,
    /// Extra [mysqld] option KEY=VAL for every server; repeatable
    #[arg(long = "extra-option", value_name = "KEY=VAL", value_parser = cluster::config::parse_key_value)]
    extra_options: Vec<(String, String)>,
    /// Tandem library [default: $TANDEM_PROVIDER or target/release/libtandem.so]
    #[arg(long)]
    tandem_path: Option<PathBuf>,
    /// Galera library [default: /usr/lib/galera/libgalera_smm.so]
    #[arg(long)]
    galera_path: Option<PathBuf>,
    /// Working directory: one cluster per target, sysbench logs
    #[arg(long, default_value = ".tandem/bench")]
    dir: PathBuf,
    /// Markdown report [default: docs/benchmarks.md in the workspace; with --quick: DIR/benchmarks.md]
    #[arg(long)]
    doc: Option<PathBuf>,
    /// JSON results, compared with on the next run [default: the report's path with .json]
    #[arg(long)]
    json: Option<PathBuf>,
    /// Measure nothing: write the report (--doc) again from the JSON results
    /// of an earlier run, e.g. after the report's layout changed
    #[arg(long, value_name = "RESULTS_JSON")]
    render_from: Option<PathBuf>,
    /// With --render-from: the earlier run its Repeatability section compares with
    #[arg(long, value_name = "RESULTS_JSON", requires = "render_from")]
    compare_with: Option<PathBuf>,
}

/// Three rounds of 6 s rather than one of 18 s: on this kind of VM the noise
/// is a stall of a few seconds now and then, which the median of three
/// rounds outvotes and one long run averages in. Measured: with one 10 s
/// round, two runs' T/G ratios of a cell differed by up to 79% (docs/benchmarks.md, runs 3 and 4).
const DEFAULT_ROUNDS: u32 = 3;

/// The sizes of a run, after `--quick` and the explicit options.
struct Sizes {
    matrix: Matrix,
    data: DataSet,
    warmup_s: u32,
    duration_s: u32,
}

fn sizes(args: &BenchArgs) -> Result<Sizes> {
    let q = args.quick;
    let workloads = args.workloads.clone().unwrap_or_else(|| {
        if q {
            vec![Workload::OltpWriteOnly, Workload::OltpPointSelect]
        } else {
            Workload::ALL.to_vec()
        }
    });
    let threads =
        args.threads
            .clone()
            .unwrap_or_else(|| if q { vec![1, 8] } else { vec![1, 4, 16, 64] });
    let placements = args
        .placements
        .clone()
        .unwrap_or_else(|| vec![Placement::Node1, Placement::Spread]);
    if threads.is_empty() || threads.contains(&0) {
        bail!("--threads needs positive numbers");
    }
    let mut targets = args.targets.clone();
    targets.dedup();
    let s = Sizes {
        matrix: Matrix {
            workloads,
            threads,
            placements,
            targets,
            nodes: usize::from(args.nodes),
            rounds: args.rounds.unwrap_or(if q { 1 } else { DEFAULT_ROUNDS }),
        },
        data: DataSet {
            tables: args.tables.unwrap_or(if q { 2 } else { 8 }),
            table_size: args.table_size.unwrap_or(if q { 10_000 } else { 100_000 }),
        },
        warmup_s: args.warmup.unwrap_or(if q { 1 } else { 2 }),
        duration_s: args.duration.unwrap_or(if q { 5 } else { 6 }),
    };
    if s.data.tables == 0 || s.data.table_size == 0 || s.duration_s == 0 || s.matrix.rounds == 0 {
        bail!("--tables, --table-size, --duration and --rounds must be positive");
    }
    Ok(s)
}

pub fn run(args: BenchArgs) -> Result<()> {
    if let Some(from) = &args.render_from {
        return render_again(&args, from);
    }
    let sizes = sizes(&args)?;
    let sysbench = find_program("sysbench")
        .context("the benchmark drives sysbench (apt-get install sysbench, or make deps)")?;
    cluster::prereq::Tools::find()?;
    let paths = target_paths(&args, &sizes.matrix.targets)?;
    let (doc, json) = output_paths(&args);
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let dir = std::fs::canonicalize(&args.dir)?;
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    let previous = read_previous(&json);

    let started = Instant::now();
    let date = environment::utc_now();
    let mysqld_options = server_options(&args);
    let runs = sizes.matrix.runs();
    let mut progress = Progress::new(sizes.matrix.targets.len() + runs.len());
    let clusters = start_targets(&args, &sizes, &paths, &mysqld_options, &dir, &mut progress)?;
    let bench = Bench {
        sysbench: &sysbench,
        data: sizes.data,
        warmup_s: sizes.warmup_s,
        duration_s: sizes.duration_s,
        logs: &logs,
    };
    for (kind, cluster) in &clusters {
        progress.start(&format!(
            "{kind}: loading {} x {} rows",
            bench.data.tables, bench.data.table_size
        ));
        bench.load(*kind, cluster)?;
    }

    let cells = sizes.matrix.cells();
    let mut results: Vec<CellResult> = cells
        .iter()
        .map(|&cell| CellResult {
            cell,
            runs: Vec::new(),
        })
        .collect();
    for run in &runs {
        let cell = &cells[run.cell];
        let what = match sizes.matrix.rounds {
            1 => format!("{} {}", run.target, cell.label()),
            n => format!("{} {} (round {}/{n})", run.target, cell.label(), run.round + 1),
        };
        progress.start(&what);
        let cluster = &clusters
            .iter()
            .find(|(k, _)| *k == run.target)
            .expect("started")
            .1;
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
            mysqld_options,
        },
        cells: results,
        resources: Vec::new(),
        elapsed_s: 0.0,
    };
    for (kind, cluster) in &clusters {
        let (cpu_s, transactions) = out.totals(*kind);
        out.resources.push(Resources {
            target: *kind,
            peak_rss_mib: runner::peak_rss_mib(cluster)?,
            cpu_s,
            transactions,
        });
    }
    out.elapsed_s = started.elapsed().as_secs_f64();
    drop(clusters); // stops every server before the report claims we are done
    progress.clear();
    write_outputs(&out, previous.as_ref(), &doc, &json)?;
    let failed = out
        .cells
        .iter()
        .flat_map(|c| &c.runs)
        .filter(|m| m.error.is_some())
        .count();
    let _ = std::io::Write::write_all(
        &mut std::io::stdout(),
        format!(
            "benchmark done in {}: {} runs, {failed} failed; report {}, data {}\n",
            clock(started.elapsed()),
            runs.len(),
            doc.display(),
            json.display()
        )
        .as_bytes(),
    );
    if failed > 0 {
        bail!(
            "{failed} run(s) failed: see the report and the sysbench logs in {}",
            logs.display()
        );
    }
    Ok(())
}

struct TargetPaths {
    tandem: Option<PathBuf>,
    galera: Option<PathBuf>,
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
    let json = args
        .json
        .clone()
        .unwrap_or_else(|| doc.with_extension("json"));
    (doc, json)
}

/// `--render-from`: the Markdown report from kept results; the JSON is not touched.
fn render_again(args: &BenchArgs, from: &Path) -> Result<()> {
    let read = |path: &Path| -> Result<Results> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| {
            format!("{} is not the JSON results of a tandem bench run", path.display())
        })
    };
    let results = read(from)?;
    let previous = args.compare_with.as_deref().map(read).transpose()?;
    let (doc, _) = output_paths(args);
    std::fs::write(&doc, report::render(&results, previous.as_ref()))
        .with_context(|| format!("writing {}", doc.display()))?;
    println!("wrote {}", doc.display());
    Ok(())
}

fn read_previous(json: &Path) -> Option<Results> {
    let text = std::fs::read_to_string(json).ok()?;
    serde_json::from_str(&text).ok()
}

/// The same server settings for every target; only wsrep differs.
fn server_options(args: &BenchArgs) -> Vec<(String, String)> {
    let mut options = vec![
        (
            "innodb_buffer_pool_size".to_string(),
            args.buffer_pool.clone(),
        ),
        // Durability comes from the cluster; the usual Galera setting, and it
        // keeps the disk's fsync rate from hiding the replication cost.
        (
            "innodb_flush_log_at_trx_commit".to_string(),
            "2".to_string(),
        ),
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
        let (nodes, path) = match kind {
            ProviderKind::Tandem => (sizes.matrix.nodes, paths.tandem.clone()),
            ProviderKind::Galera => (sizes.matrix.nodes, paths.galera.clone()),
            ProviderKind::Standalone => (1, None),
        };
        let spec = ClusterSpec {
            provider_path: path,
            slave_threads: args.slave_threads,
            mysqld_options: mysqld_options.to_vec(),
            ..ClusterSpec::new(dir.join(kind.to_string()), nodes, kind)
        };
        progress.start(&format!("{kind}: starting {nodes} node(s)"));
        let took = Instant::now();
        let cluster = Cluster::up(spec).with_context(|| format!("starting the {kind} target"))?;
        progress.finish(&format!(
            "{kind}: {nodes} node(s) up in {:.0} s",
            took.elapsed().as_secs_f64()
        ));
        clusters.push((kind, cluster));
    }
    Ok(clusters)
}

fn write_outputs(out: &Results, previous: Option<&Results>, doc: &Path, json: &Path) -> Result<()> {
    for path in [doc, json] {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
    }
    let text = serde_json::to_string_pretty(out)?;
    std::fs::write(json, text + "\n").with_context(|| format!("writing {}", json.display()))?;
    std::fs::write(doc, report::render(out, previous))
        .with_context(|| format!("writing {}", doc.display()))
}

/// How the user invoked us, program name shortened to `tandem`.
fn command_line() -> String {
    let mut words: Vec<String> = std::env::args().skip(1).collect();
    words.insert(0, "tandem".into());
    words
        .iter()
        .map(|w| {
            if w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_=./,:".contains(c))
            {
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
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn args(words: &[&str]) -> BenchArgs {
        Cli::try_parse_from(std::iter::once("bench").chain(words.iter().copied()))
            .unwrap()
            .bench
    }

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
        assert!(format!("{err:#}").contains("is not the JSON results of a tandem bench run"), "{err:#}");
    }

    #[test]
    fn compare_with_needs_render_from() {
        assert!(Cli::try_parse_from(["bench", "--compare-with", "x.json"]).is_err());
    }

    #[test]
    fn rounds_default_to_three_and_quick_to_one() {
        assert_eq!(sizes(&args(&[])).unwrap().matrix.rounds, 3);
        assert_eq!(sizes(&args(&["--quick"])).unwrap().matrix.rounds, 1);
        assert_eq!(sizes(&args(&["--quick", "--rounds", "2"])).unwrap().matrix.rounds, 2);
        assert!(sizes(&args(&["--rounds", "0"])).is_err());
    }
}
