//! `tandem-lab wan`: Tandem and Galera side by side with their nodes in two
//! sites (issue 47). Nodes 1 and 2 in site 1, node 3 in site 2, the round
//! trip between the sites given (`tandem wan emulate`, in the namespaces of
//! `tandem_wan::layout`); both providers on the same layout, the same
//! MariaDB and the same options. In each site, sysbench running one
//! autocommit UPDATE per event (one write-set each) at each thread count:
//! commits per second, the commit's p50 and p95, and the bytes that crossed
//! between the sites per commit; then one causal read per event
//! (`wsrep_sync_wait=1`, a point SELECT) while nothing is written.
//! Writes docs/benchmarks-wan.md (the 1+1+1 and 2+2+1 layouts are still to
//! come).

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
    work: Work,
    tps: f64,
    p50: Option<f64>,
    p95: Option<f64>,
    /// Bytes between the sites per event, both ways, over the measured time.
    wan_bytes: Option<f64>,
}

/// What each sysbench event does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    /// One autocommit UPDATE: one write-set, one commit.
    Commit,
    /// One point SELECT with `wsrep_sync_wait=1`: one causal read.
    CausalRead,
}

impl Work {
    fn name(self) -> &'static str {
        match self {
            Work::Commit => "commit",
            Work::CausalRead => "causal read",
        }
    }

    fn script(self) -> &'static str {
        match self {
            Work::Commit => COMMIT_SCRIPT,
            Work::CausalRead => CAUSAL_READ_SCRIPT,
        }
    }
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
    for work in [Work::Commit, Work::CausalRead] {
        for node in MEASURED {
            for &threads in &args.threads {
                let run = Run { bench, cluster: &cluster, layout: &layout, name: &name, node, threads, work };
                let row = Row { target: kind, rtt, ..measure(&run)? };
                eprintln!(
                    "wan: {name} node {node}, {} at {threads} thread(s): {:.1} tps, p50 {:?} ms, p95 {:?} ms, \
                     {:?} WAN bytes each",
                    work.name(),
                    row.tps,
                    row.p50,
                    row.p95,
                    row.wan_bytes
                );
                rows.push(row);
                runner::drain(kind, &cluster)?;
            }
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

/// A causal read of a random row per event; the session waits for what
/// the cluster committed before the read was asked (`wsrep_sync_wait=1`).
const CAUSAL_READ_SCRIPT: &str = r#"
function thread_init()
   con = sysbench.sql.driver():connect()
   con:query("SET SESSION wsrep_sync_wait=1")
end
function event()
   con:query("SELECT k FROM sbtest1 WHERE id=" .. sysbench.rand.uniform(1, 10000))
end
"#;

/// One sysbench run: what, where, how many threads.
struct Run<'a> {
    bench: &'a Bench<'a>,
    cluster: &'a Cluster,
    layout: &'a Layout,
    name: &'a str,
    node: usize,
    threads: u32,
    work: Work,
}

/// One run on its node: events per second, p50 and p95 (ms), and the bytes
/// that crossed between the sites per event while measured (after warm-up).
fn measure(run: &Run) -> Result<Row> {
    let (bench, cluster, node, threads) = (run.bench, run.cluster, run.node, run.threads);
    let script = bench.logs.join(format!("wan-{}.lua", run.work.name().replace(' ', "-")));
    std::fs::write(&script, run.work.script())?;
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
    let log =
        bench.logs.join(format!("{}-node{node}-{}-{threads}thr.txt", run.name, run.work.name().replace(' ', "-")));
    let limit = Duration::from_secs(u64::from(bench.warmup_s + bench.duration_s) + 120);
    let child = bench.spawn(&args, &log)?;
    std::thread::sleep(Duration::from_secs(u64::from(bench.warmup_s)));
    let bytes_from = run.layout.wan_bytes()?;
    let status = runner::wait_or_kill(child, limit)?;
    let bytes = run.layout.wan_bytes()? - bytes_from;
    let reports = runner::read_reports(&[log], &[status])?;
    let report = reports.first().context("no sysbench report")?;
    // The counter also ran while sysbench ended: a few heartbeats more.
    let events = report.tps * f64::from(bench.duration_s);
    Ok(Row {
        target: ProviderKind::Tandem,
        rtt: 0,
        node,
        threads,
        work: run.work,
        tps: report.tps,
        p50: sysbench::percentile(&report.histogram, 50.0),
        p95: report.p95_ms,
        wan_bytes: (events > 0.0).then(|| bytes as f64 / events),
    })
}

fn render(args: &WanArgs, rows: &[Row], failures: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Sites apart: Tandem and Galera\n");
    let _ = writeln!(
        out,
        "Written by `tandem-lab wan --rtts {} --targets {} --threads {} --seconds {}` on {} ({} cores). \
         Nodes 1 and 2 in site 1, node 3 in site 2, the round trip between the sites emulated by \
         `tandem wan emulate` (README, \"Sites apart\"); sysbench running one autocommit UPDATE of a \
         random row per event (`crates/lab/src/wan.rs`: one write-set each), then one causal read \
         (`wsrep_sync_wait=1`, a point SELECT) per event with nothing written, on node 1 for site 1 and on \
         node 3 for site 2, {} s after 2 s of warm-up. The nodes carry their site as `gmcast.segment` (1 and 2) \
         on both providers. Latencies are sysbench's, in ms; a ratio is Tandem's over Galera's (below 1: \
         Tandem faster). WAN bytes: what the kernel routed from one site to the other, both ways, over the \
         measured seconds, per event.\n",
        join(&args.rtts),
        args.targets.iter().map(ToString::to_string).collect::<Vec<_>>().join(","),
        join(&args.threads),
        args.seconds,
        today(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        args.seconds,
    );
    let _ = writeln!(out, "| RTT | site | what | threads | target | per s | p50 | p95 | p50 vs Galera | WAN bytes |");
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        let galera = rows.iter().find(|g| {
            g.target == ProviderKind::Galera
                && (g.rtt, g.node, g.threads, g.work) == (row.rtt, row.node, row.threads, row.work)
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
            "| {} ms | {site} | {} | {} | {} | {:.1} | {} | {} | {ratio} | {} |",
            row.rtt,
            row.work.name(),
            row.threads,
            row.target,
            row.tps,
            ms(row.p50),
            ms(row.p95),
            row.wan_bytes.map_or("-".into(), |b| format!("{b:.0}"))
        );
    }
    for failure in failures {
        let _ = writeln!(out, "\nFAILED: {failure}");
    }
    let _ = writeln!(out, "\nNot measured yet (issue 47): the 1+1+1 and 2+2+1 layouts.");
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
        Row { target, rtt: 50, node, threads: 1, work: Work::Commit, tps: 19.5, p50, p95: Some(60.0), wan_bytes: None }
    }

    #[test]
    fn the_report_sets_each_tandem_row_against_galeras() {
        let args = Cli::parse_from(["wan", "--rtts", "50", "--threads", "1"]).wan;
        let read = |target, p50| Row { work: Work::CausalRead, wan_bytes: Some(310.4), ..row(target, 3, p50) };
        let rows = [
            row(ProviderKind::Tandem, 1, Some(0.8)),
            row(ProviderKind::Tandem, 3, Some(52.0)),
            read(ProviderKind::Tandem, Some(26.0)),
            row(ProviderKind::Galera, 1, Some(40.0)),
            row(ProviderKind::Galera, 3, None),
            read(ProviderKind::Galera, Some(52.0)),
        ];
        let text = render(&args, &rows, &["galera at 100 ms: no primary".into()]);
        assert!(text.contains("`tandem-lab wan --rtts 50 --targets tandem,galera --threads 1 --seconds 10`"), "{text}");
        assert!(
            text.contains("| 50 ms | 1 (majority) | commit | 1 | tandem | 19.5 | 0.80 | 60.00 | 0.02x | - |"),
            "{text}"
        );
        assert!(
            text.contains("| 50 ms | 2 | commit | 1 | tandem | 19.5 | 52.00 | 60.00 | - | - |"),
            "no Galera p50 to compare: {text}"
        );
        assert!(
            text.contains("| 50 ms | 2 | causal read | 1 | tandem | 19.5 | 26.00 | 60.00 | 0.50x | 310 |"),
            "a read set against Galera's read, not its commit: {text}"
        );
        assert!(
            text.contains("| 50 ms | 1 (majority) | commit | 1 | galera | 19.5 | 40.00 | 60.00 |  | - |"),
            "{text}"
        );
        assert!(text.contains("FAILED: galera at 100 ms: no primary"), "{text}");
    }
}
