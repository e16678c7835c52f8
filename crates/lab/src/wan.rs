//! `tandem-lab wan`: Tandem and Galera side by side with their nodes in two
//! sites (issue 47). Nodes 1 and 2 in site 1, node 3 in site 2, the round
//! trip between the sites given (`tandem wan emulate`, in the namespaces of
//! `tandem_wan::layout`); both providers on the same layout, the same
//! MariaDB and the same options. In each site, sysbench running one
//! autocommit UPDATE per event (one write-set each) at each thread count:
//! commits per second and the commit's p50 and p95.
//! Writes docs/benchmarks-wan.md (first version: the 2+1 layout only; the
//! 1+1+1 and 2+2+1 layouts, causal reads and WAN bytes are still to come).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use tandem::cluster::prereq::{find_program, workspace_root, Tools};
use tandem::cluster::{self, Cluster, ClusterSpec, Host, ProviderKind};
use tandem_wan::layout::Layout;

use crate::bench::runner::{self, Bench, DataSet};
use crate::bench::sysbench;

#[derive(Args, Debug)]
pub struct WanArgs {
    /// Round trips between the two sites, in ms: a layout each
    #[arg(long, value_delimiter = ',', default_value = "10,50,100")]
    rtts: Vec<u32>,
    /// Providers, each on every layout
    #[arg(long, value_enum, value_delimiter = ',', default_value = "tandem,galera")]
    targets: Vec<ProviderKind>,
    /// Client threads of each run
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    threads: Vec<u32>,
    /// Measured seconds of each run (after 2 s of warm-up)
    #[arg(long, default_value_t = 10)]
    seconds: u32,
    #[arg(long)]
    tandem_path: Option<PathBuf>,
    #[arg(long)]
    galera_path: Option<PathBuf>,
    /// The report (default: docs/benchmarks-wan.md in the source tree)
    #[arg(long)]
    doc: Option<PathBuf>,
    /// The clusters' directories and the sysbench logs
    #[arg(long, default_value = "/tmp/tandem-lab-wan")]
    dir: PathBuf,
}

/// One sysbench run in one site.
#[derive(Clone, Debug)]
struct Row {
    target: ProviderKind,
    rtt: u32,
    node: usize,
    threads: u32,
    tps: f64,
    p50: Option<f64>,
    p95: Option<f64>,
}

/// Sites of the layout: nodes 1 and 2 in site 1, node 3 in site 2.
const SITES: [usize; 2] = [2, 1];
/// The node each site's clients use.
const MEASURED: [usize; 2] = [1, 3];

pub fn run(args: WanArgs) -> Result<()> {
    let sysbench = find_program("sysbench").context("the WAN bench drives sysbench (make deps)")?;
    Tools::find()?;
    let tandem = cluster::sst_script::tandem_binary().context("no tandem binary beside tandem-lab (make build)")?;
    std::fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
    let dir = std::fs::canonicalize(&args.dir)?;
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    let bench = Bench {
        sysbench: &sysbench,
        data: DataSet { tables: 2, table_size: 10_000 },
        warmup_s: 2,
        duration_s: args.seconds,
        logs: &logs,
    };
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for &rtt in &args.rtts {
        for &kind in &args.targets {
            eprintln!("wan: {kind}, sites 2+1, {rtt} ms apart");
            match on_layout(&args, &bench, &tandem, kind, rtt) {
                Ok(mut measured) => rows.append(&mut measured),
                Err(e) => {
                    eprintln!("wan: {kind} at {rtt} ms FAILED: {e:#}");
                    failures.push(format!("{kind} at {rtt} ms: {e:#}"));
                }
            }
        }
    }
    let doc = args
        .doc
        .clone()
        .unwrap_or_else(|| workspace_root().unwrap_or_else(|| PathBuf::from(".")).join("docs/benchmarks-wan.md"));
    let text = render(&args, &rows, &failures);
    std::fs::write(&doc, &text).with_context(|| format!("writing {}", doc.display()))?;
    println!("{text}");
    anyhow::ensure!(failures.is_empty(), "{} layout(s) failed (in the report)", failures.len());
    Ok(())
}

/// One provider on one layout: the cluster started on it, the tables
/// loaded, then every run in each site.
fn on_layout(args: &WanArgs, bench: &Bench, tandem: &Path, kind: ProviderKind, rtt: u32) -> Result<Vec<Row>> {
    let mut layout = Layout::new(&SITES)?;
    let name = format!("{kind}-{rtt}ms");
    layout.emulate(tandem, &[format!("s1-s2:rtt={rtt}ms")], 1, &bench.logs.join(format!("{name}-emulator.log")))?;
    let hosts: Vec<Host> = (1..=layout.nodes())
        .map(|i| Host {
            address: layout.address(i),
            netns: Some(layout.namespace(i)),
            segment: u8::try_from(layout.site(i)).ok(),
        })
        .collect();
    let provider_path = match kind {
        ProviderKind::Galera => &args.galera_path,
        _ => &args.tandem_path,
    };
    let spec = ClusterSpec {
        provider_path: Some(cluster::prereq::resolve_provider(kind, provider_path.as_deref())?),
        hosts,
        ..ClusterSpec::new(args.dir.join(&name), layout.nodes(), kind)
    };
    // Declared after the layout, so stopped before the network goes.
    let cluster = Cluster::up(spec).with_context(|| format!("starting {name}"))?;
    bench.load(kind, &cluster)?;
    let mut rows = Vec::new();
    for node in MEASURED {
        for &threads in &args.threads {
            let (tps, p50, p95) = measure(bench, &cluster, &name, node, threads)?;
            eprintln!("wan: {name} node {node}, {threads} thread(s): {tps:.1} tps, p50 {p50:?} ms, p95 {p95:?} ms");
            rows.push(Row { target: kind, rtt, node, threads, tps, p50, p95 });
            runner::drain(kind, &cluster)?;
        }
    }
    Ok(rows)
}

/// One autocommit UPDATE of a random row per event: one event, one
/// write-set, one commit (the rows' ids are 1..10000: `prepare_args`).
const COMMIT_SCRIPT: &str = r#"
function thread_init()
   con = sysbench.sql.driver():connect()
end
function event()
   con:query("UPDATE sbtest1 SET k=k+1 WHERE id=" .. sysbench.rand.uniform(1, 10000))
end
"#;

/// One run of the commit script on `node`: commits per second, p50 and p95 (ms).
fn measure(
    bench: &Bench,
    cluster: &Cluster,
    name: &str,
    node: usize,
    threads: u32,
) -> Result<(f64, Option<f64>, Option<f64>)> {
    let script = bench.logs.join("wan-commit.lua");
    std::fs::write(&script, COMMIT_SCRIPT)?;
    let socket = cluster.node(node).socket.display().to_string();
    let args: Vec<String> = vec![
        script.display().to_string(),
        format!("--mysql-socket={socket}"),
        "--mysql-user=root".into(),
        "--mysql-db=sbtest".into(),
        format!("--threads={threads}"),
        format!("--time={}", bench.warmup_s + bench.duration_s),
        format!("--report-checkpoints={}", bench.warmup_s),
        "--percentile=95".into(),
        "--histogram=on".into(),
        "run".into(),
    ];
    let log = bench.logs.join(format!("{name}-node{node}-{threads}thr.txt"));
    let limit = Duration::from_secs(u64::from(bench.warmup_s + bench.duration_s) + 120);
    let status = runner::wait_or_kill(bench.spawn(&args, &log)?, limit)?;
    let reports = runner::read_reports(&[log], &[status])?;
    let report = reports.first().context("no sysbench report")?;
    Ok((report.tps, sysbench::percentile(&report.histogram, 50.0), report.p95_ms))
}

fn render(args: &WanArgs, rows: &[Row], failures: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Sites apart: Tandem and Galera\n");
    let _ = writeln!(
        out,
        "Written by `tandem-lab wan --rtts {} --targets {} --threads {} --seconds {}` on {} ({} cores). \
         Nodes 1 and 2 in site 1, node 3 in site 2, the round trip between the sites emulated by \
         `tandem wan emulate` (README, \"Sites apart\"); sysbench running one autocommit UPDATE of a \
         random row per event (`crates/lab/src/wan.rs`: one write-set each) on node 1 for site 1 and on node 3 for site 2, {} s after 2 s of warm-up. \
         Latencies are sysbench's, in ms; a ratio is Tandem's over Galera's (below 1: Tandem faster).\n",
        join(&args.rtts),
        args.targets.iter().map(ToString::to_string).collect::<Vec<_>>().join(","),
        join(&args.threads),
        args.seconds,
        today(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        args.seconds,
    );
    let _ = writeln!(out, "| RTT | site | threads | target | tps | p50 | p95 | p50 vs Galera |");
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    for row in rows {
        let galera = rows.iter().find(|g| {
            g.target == ProviderKind::Galera && (g.rtt, g.node, g.threads) == (row.rtt, row.node, row.threads)
        });
        let ratio = match (row.target, row.p50, galera.and_then(|g| g.p50)) {
            (ProviderKind::Galera, _, _) => String::new(),
            (_, Some(ours), Some(theirs)) if theirs > 0.0 => format!("{:.2}x", ours / theirs),
            _ => "-".into(),
        };
        let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
        let site = if row.node == MEASURED[0] { "1 (majority)" } else { "2" };
        let _ = writeln!(
            out,
            "| {} ms | {site} | {} | {} | {:.1} | {} | {} | {ratio} |",
            row.rtt,
            row.threads,
            row.target,
            row.tps,
            ms(row.p50),
            ms(row.p95)
        );
    }
    for failure in failures {
        let _ = writeln!(out, "\nFAILED: {failure}");
    }
    let _ = writeln!(
        out,
        "\nNot measured yet (issue 47): the 1+1+1 and 2+2+1 layouts, causal reads in each site, \
         and the bytes crossing between sites per commit."
    );
    out
}

fn join(values: &[u32]) -> String {
    values.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

fn today() -> String {
    tandem::time_fmt::utc_date(crate::mtr::host::now_unix())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        wan: WanArgs,
    }

    fn row(target: ProviderKind, node: usize, p50: Option<f64>) -> Row {
        Row { target, rtt: 50, node, threads: 1, tps: 19.5, p50, p95: Some(60.0) }
    }

    #[test]
    fn the_report_sets_each_tandem_row_against_galeras() {
        let args = Cli::parse_from(["wan", "--rtts", "50", "--threads", "1"]).wan;
        let rows = [
            row(ProviderKind::Tandem, 1, Some(0.8)),
            row(ProviderKind::Tandem, 3, Some(52.0)),
            row(ProviderKind::Galera, 1, Some(40.0)),
            row(ProviderKind::Galera, 3, None),
        ];
        let text = render(&args, &rows, &["galera at 100 ms: no primary".into()]);
        assert!(text.contains("`tandem-lab wan --rtts 50 --targets tandem,galera --threads 1 --seconds 10`"), "{text}");
        assert!(text.contains("| 50 ms | 1 (majority) | 1 | tandem | 19.5 | 0.80 | 60.00 | 0.02x |"), "{text}");
        assert!(
            text.contains("| 50 ms | 2 | 1 | tandem | 19.5 | 52.00 | 60.00 | - |"),
            "no Galera p50 to compare: {text}"
        );
        assert!(text.contains("| 50 ms | 1 (majority) | 1 | galera | 19.5 | 40.00 | 60.00 |  |"), "{text}");
        assert!(text.contains("FAILED: galera at 100 ms: no primary"), "{text}");
    }
}
