//! `tandem bench`: sysbench on Tandem, Galera and a standalone MariaDB, side
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

mod environment;
pub mod causal_cell;
pub mod fc_cell;
pub mod plan;
pub mod procfs;
pub mod rejoin;
pub mod report;
pub mod rejoin_results;
pub mod results;
mod runner;
pub mod single_node;
pub mod sst_cell;
pub mod stream_cell;
pub mod sysbench;
pub mod tls_cell;
pub mod transfer;

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
    /// oltp_point_select, 1 and 8 threads, 5 s runs, rejoins after 2000
    /// write-sets; report under --dir
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
    /// Skip the main matrix: only the rejoin scenario and the 1-node cell
    /// (e.g. the rejoin on a large data set)
    #[arg(long)]
    no_matrix: bool,
    /// Skip the rejoin scenario (stop the last node, write, restart it, time it to Synced)
    #[arg(long)]
    no_rejoin: bool,
    /// Write-sets (sysbench oltp_write_only --events) written while the node
    /// is away [default: 100000; with --quick: 2000]
    #[arg(long, value_name = "N")]
    rejoin_writes: Option<u64>,
    /// Rounds of each rejoin variant on each target [default: 3; with --quick: 1]
    #[arg(long)]
    rejoin_rounds: Option<u32>,
    /// The downtime variant: seconds the node stays away under a steady
    /// write load; 0 skips it [default: 60; with --quick: 5]
    #[arg(long, value_name = "SECONDS")]
    rejoin_downtime: Option<u32>,
    /// Transactions per second of that load [default: 1000; with --quick: 200]
    #[arg(long, value_name = "TPS")]
    rejoin_rate: Option<u32>,
    /// gcache.size of both providers, the same on both [default: 512M, enough
    /// for an IST of the rejoin writes; with --quick: 128M; with --no-rejoin:
    /// the providers' own default]
    #[arg(long, value_name = "SIZE")]
    gcache_size: Option<String>,
    /// Skip the 1-node cell (every replicated cluster shrunk to node 1, against standalone)
    #[arg(long)]
    no_single_node: bool,
    /// Extra wsrep_provider_options item of Tandem only, e.g. gcache.fsync=YES; repeatable
    #[arg(long = "tandem-option", value_name = "KEY=VAL", value_parser = crate::cluster::config::parse_key_value)]
    tandem_options: Vec<(String, String)>,
    /// TLS on the group channel of both providers (`tandem cluster up --tls`:
    /// the same certificates, Galera's option names), and on SST. Compare
    /// with a run without it for the cost of TLS
    #[arg(long)]
    tls: bool,
    /// Also measure what TLS costs inside this run: a TLS cluster of each
    /// replicated provider next to the plaintext one, oltp_write_only 16
    /// threads spread over the nodes on all four, in rounds
    #[arg(long, conflicts_with_all = ["tls", "no_matrix"])]
    tls_cell: bool,
    /// Also measure causal reads: point selects with wsrep_sync_wait=1 on
    /// node 2 while node 1 writes, on each replicated provider
    #[arg(long)]
    causal_cell: bool,
    /// Also measure flow control: the last node applies slowly (one applier,
    /// a table without primary key there) while node 1 writes; the writers'
    /// throughput, the slow node's lag and the time paused, per provider
    #[arg(long)]
    fc_cell: bool,
    /// Also measure streaming replication: one large transaction on node 1
    /// in 1 MiB fragments while the last node takes ordinary writes; its
    /// INSERT and COMMIT times and every node's peak RSS, per provider
    #[arg(long)]
    stream_cell: bool,
    /// The streaming cell's transaction, MiB of rows [default: 100, 10 with --quick]
    #[arg(long, value_name = "MIB")]
    stream_mib: Option<u64>,
    /// Also measure state transfers: node 2 of a 2-node Tandem cluster of its
    /// own rejoins empty by the mariabackup and the tandem SST methods in
    /// turn, next to a raw tar | socat copy of the same data directory
    #[arg(long)]
    sst_cell: bool,
    /// The SST cell's data directory, GiB of sysbench data [default: 2, 0.1 with --quick]
    #[arg(long, value_name = "GIB")]
    sst_gib: Option<f64>,
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
    /// None with --no-rejoin.
    rejoin: Option<rejoin::Plan>,
    /// `wsrep_provider_options` items of both providers.
    provider_options: Vec<(String, String)>,
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
        rejoin: (!args.no_rejoin).then(|| rejoin::Plan {
            writes: args.rejoin_writes.unwrap_or(if q { 2_000 } else { 100_000 }),
            rounds: args.rejoin_rounds.unwrap_or(if q { 1 } else { DEFAULT_ROUNDS }),
            downtime_s: args.rejoin_downtime.unwrap_or(if q { 5 } else { 60 }),
            rate: args.rejoin_rate.unwrap_or(if q { 200 } else { 1000 }),
        }),
        provider_options: Vec::new(),
    };
    if s.data.tables == 0 || s.data.table_size == 0 || s.duration_s == 0 || s.matrix.rounds == 0 {
        bail!("--tables, --table-size, --duration and --rounds must be positive");
    }
    if let Some(p) = &s.rejoin {
        if p.writes == 0 || p.rounds == 0 || (p.downtime_s > 0 && p.rate == 0) {
            bail!("--rejoin-writes, --rejoin-rounds and --rejoin-rate must be positive");
        }
    }
    let gcache = args.gcache_size.clone().or_else(|| {
        s.rejoin
            .as_ref()
            .map(|_| if q { "128M".to_string() } else { DEFAULT_GCACHE.to_string() })
    });
    let mut s = s;
    if let Some(size) = gcache {
        s.provider_options.push(("gcache.size".into(), size));
    }
    Ok(s)
}

/// Both providers' gcache for the rejoin scenario: an IST needs the donor to
/// still hold every write-set the node missed. Measured (`tandem bench
/// --quick`, node 1's `wsrep_replicated_bytes` over 2000 write-sets): an
/// `oltp_write_only` write-set is 1.73 KiB with Galera and 1.57 KiB with
/// Tandem, so 100000 of them take about 170 MiB, and a minute at 1000 per
/// second about 100 MiB: this leaves three times that. Not more: Galera maps
/// its ring buffer into the process, and what it has written of it counts
/// in its RSS (the report splits RSS into anonymous and file pages).
const DEFAULT_GCACHE: &str = "512M";

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
        sizes.matrix.targets.iter().copied().filter(|&k| k != ProviderKind::Standalone).collect()
    } else {
        Vec::new()
    };
    let tls_runs = if tls_kinds.is_empty() { 0 } else { tls_cell::runs(&tls_kinds, sizes.matrix.rounds).len() };
    let causal_runs = if args.causal_cell {
        let replicated: Vec<ProviderKind> =
            sizes.matrix.targets.iter().copied().filter(|&k| k != ProviderKind::Standalone).collect();
        causal_cell::runs(&replicated, sizes.matrix.rounds).len()
    } else {
        0
    };
    let fc_runs = if args.fc_cell {
        let replicated: Vec<ProviderKind> =
            sizes.matrix.targets.iter().copied().filter(|&k| k != ProviderKind::Standalone).collect();
        fc_cell::runs(&replicated, sizes.matrix.rounds).len()
    } else {
        0
    };
    let stream_runs = if args.stream_cell {
        let replicated: Vec<ProviderKind> =
            sizes.matrix.targets.iter().copied().filter(|&k| k != ProviderKind::Standalone).collect();
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
        progress.start(&format!(
            "{kind}: loading {} x {} rows",
            bench.data.tables, bench.data.table_size
        ));
        bench.load(*kind, cluster)?;
    }

    let cells = if args.no_matrix { Vec::new() } else { sizes.matrix.cells() };
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
    let failed = out
        .cells
        .iter()
        .flat_map(|c| &c.runs)
        .filter(|m| m.error.is_some())
        .count()
        + out.rejoin.as_ref().map_or(0, |r| r.failed())
        + out.single_node.as_ref().map_or(0, |s| s.failed())
        + out.tls_cell.as_ref().map_or(0, |t| t.failed())
        + out.causal_cell.as_ref().map_or(0, |c| c.failed())
        + out.fc_cell.as_ref().map_or(0, |c| c.failed())
        + out.stream_cell.as_ref().map_or(0, |c| c.failed())
        + out.sst_cell.as_ref().map_or(0, |c| c.failed());
    let all_runs =
        runs.len() + rejoin_runs + single_runs + tls_runs + causal_runs + fc_runs + stream_runs + sst_runs;
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
        let tls = args.tls && kind != ProviderKind::Standalone;
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
    };
    let provider_options = match kind {
        ProviderKind::Standalone => Vec::new(),
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
    for &(kind, _) in plain.iter().filter(|c| c.0 != ProviderKind::Standalone) {
        let started = start_target(args, sizes, paths, mysqld_options, dir, kind, true, progress)
            .and_then(|cluster| {
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
    fn rejoin_is_on_by_default_with_a_gcache_for_it() {
        let full = sizes(&args(&[])).unwrap();
        let p = full.rejoin.unwrap();
        assert_eq!((p.writes, p.rounds, p.downtime_s, p.rate), (100_000, 3, 60, 1000));
        assert_eq!(full.provider_options, [("gcache.size".to_string(), "512M".to_string())]);
        let quick = sizes(&args(&["--quick"])).unwrap();
        let p = quick.rejoin.unwrap();
        assert_eq!((p.writes, p.rounds, p.downtime_s, p.rate), (2000, 1, 5, 200));
        assert_eq!(quick.provider_options, [("gcache.size".to_string(), "128M".to_string())]);
        let p = sizes(&args(&["--rejoin-writes", "5000", "--rejoin-rounds", "2", "--rejoin-downtime", "0"]))
            .unwrap()
            .rejoin
            .unwrap();
        assert_eq!((p.writes, p.rounds, p.downtime_s), (5000, 2, 0));
        assert_eq!(p.variants().len(), 2, "downtime 0 skips that variant");
    }

    #[test]
    fn no_rejoin_keeps_the_providers_defaults() {
        let s = sizes(&args(&["--no-rejoin"])).unwrap();
        assert!(s.rejoin.is_none());
        assert!(s.provider_options.is_empty(), "settings stay comparable with earlier runs");
        let s = sizes(&args(&["--no-rejoin", "--gcache-size", "2G"])).unwrap();
        assert_eq!(s.provider_options, [("gcache.size".to_string(), "2G".to_string())]);
        assert!(sizes(&args(&["--rejoin-writes", "0"])).is_err());
        assert!(sizes(&args(&["--rejoin-rate", "0"])).is_err());
        assert!(sizes(&args(&["--rejoin-rate", "0", "--rejoin-downtime", "0"])).is_ok());
    }

    #[test]
    fn the_large_rejoin_command_parses() {
        let words: Vec<&str> = report::LARGE_REJOIN.split_whitespace().skip(2).collect();
        let a = args(&words);
        assert!(a.no_matrix && a.no_single_node && !a.no_rejoin);
        let s = sizes(&a).unwrap();
        assert_eq!((s.data.tables, s.data.table_size), (8, 1_000_000));
    }

    #[test]
    fn rounds_default_to_three_and_quick_to_one() {
        assert_eq!(sizes(&args(&[])).unwrap().matrix.rounds, 3);
        assert_eq!(sizes(&args(&["--quick"])).unwrap().matrix.rounds, 1);
        assert_eq!(sizes(&args(&["--quick", "--rounds", "2"])).unwrap().matrix.rounds, 2);
        assert!(sizes(&args(&["--rounds", "0"])).is_err());
    }
}
