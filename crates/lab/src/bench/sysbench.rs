//! Driving sysbench 1.0 and reading its report.
//!
//! A run is `--time = warm-up + measured` with `--report-checkpoints=<warm-up>`:
//! sysbench resets its counters at the checkpoint, so the final report covers
//! only the measured seconds, and its rates ("per sec.") are over that window.
//! `--histogram=on` prints the latency histogram of the same window; several
//! client processes (clients spread over nodes) are combined by adding their
//! histograms, which gives the true percentile over all clients, where taking
//! the maximum of per-process percentiles would not.

use super::plan::Workload;
use anyhow::{bail, Result};
use std::path::Path;

/// The percentile reported (sysbench's default).
pub const PERCENTILE: f64 = 95.0;

/// Connection and data-set settings shared by prepare and run.
#[derive(Clone, Debug)]
pub struct Target<'a> {
    pub socket: &'a Path,
    pub tables: u32,
    pub table_size: u32,
}

impl Target<'_> {
    fn common_args(&self) -> Vec<String> {
        vec![
            format!("--mysql-socket={}", self.socket.display()),
            "--mysql-user=root".into(),
            "--mysql-db=sbtest".into(),
            format!("--tables={}", self.tables),
            format!("--table-size={}", self.table_size),
        ]
    }
}

pub fn prepare_args(target: &Target, threads: u32) -> Vec<String> {
    let mut args = vec![tandem::basedir::sysbench_script(Workload::OltpReadWrite.script())];
    args.extend(target.common_args());
    // Row ids 1..table_size, as every run draws them. With AUTO_INCREMENT ids
    // (sysbench's default), a replicated server's wsrep_auto_increment_control
    // steps them by the cluster's size: on three nodes only every third id
    // existed, so two in three point selects found nothing and two in three
    // updates changed nothing (and replicated nothing), against none on one node.
    args.push("--auto_inc=off".into());
    args.push(format!("--threads={threads}"));
    args.push("prepare".into());
    args
}

/// One client process: `warmup` seconds not counted, then `seconds` measured.
pub fn run_args(
    target: &Target,
    workload: Workload,
    threads: u32,
    warmup: u32,
    seconds: u32,
    seed: u32,
) -> Vec<String> {
    let mut args = vec![tandem::basedir::sysbench_script(workload.script())];
    args.extend(target.common_args());
    args.extend([
        format!("--threads={threads}"),
        format!("--time={}", warmup + seconds),
        format!("--rand-seed={seed}"),
        format!("--percentile={PERCENTILE}"),
        "--histogram=on".into(),
    ]);
    if warmup > 0 {
        args.push(format!("--report-checkpoints={warmup}"));
    }
    args.push("run".into());
    args
}

/// A fixed amount of work: `events` transactions (one write-set each for the
/// write workloads) from `threads` clients, however long they take.
pub fn events_args(target: &Target, workload: Workload, threads: u32, events: u64, seed: u32) -> Vec<String> {
    let mut args = vec![tandem::basedir::sysbench_script(workload.script())];
    args.extend(target.common_args());
    args.extend([
        format!("--threads={threads}"),
        format!("--events={events}"),
        "--time=0".into(),
        format!("--rand-seed={seed}"),
        format!("--percentile={PERCENTILE}"),
        "run".into(),
    ]);
    args
}

/// A steady load: `rate` transactions per second on average (sysbench
/// `--rate`) for `seconds`, so that every target gets the same amount of work
/// whatever its capacity (as long as the rate is below it).
pub fn steady_args(
    target: &Target,
    workload: Workload,
    threads: u32,
    rate: u32,
    seconds: u32,
    seed: u32,
) -> Vec<String> {
    let mut args = vec![tandem::basedir::sysbench_script(workload.script())];
    args.extend(target.common_args());
    args.extend([
        format!("--threads={threads}"),
        format!("--rate={rate}"),
        format!("--time={seconds}"),
        format!("--rand-seed={seed}"),
        format!("--percentile={PERCENTILE}"),
        "run".into(),
    ]);
    args
}

/// What one sysbench process measured (the window after the warm-up).
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub transactions: u64,
    pub tps: f64,
    /// Errors sysbench retried (deadlocks, i.e. certification failures, among them).
    pub ignored_errors: u64,
    /// sysbench's own percentile, rounded to 0.01 ms.
    pub p95_ms: Option<f64>,
    /// (upper bucket value in ms, count), ascending.
    pub histogram: Vec<(f64, u64)>,
}

/// Reads a sysbench `run` output. The last "SQL statistics" block is the
/// final report (earlier ones are checkpoints); a FATAL line means the run
/// did not happen as asked, whatever follows.
pub fn parse(text: &str) -> Result<Report> {
    let fatal: Vec<&str> = text.lines().filter(|l| l.starts_with("FATAL:")).collect();
    if !fatal.is_empty() {
        bail!("sysbench failed: {}", fatal_summary(&fatal));
    }
    let Some(start) = text.rfind("SQL statistics:") else {
        bail!("sysbench printed no report (no \"SQL statistics\" section)");
    };
    let report = &text[start..];
    let (transactions, tps) = counter_with_rate(report, "transactions:")?;
    let (ignored_errors, _) = counter_with_rate(report, "ignored errors:")?;
    let p95_ms = field(report, "th percentile:").and_then(|v| v.parse().ok());
    Ok(Report { transactions, tps, ignored_errors, p95_ms, histogram: histogram(text) })
}

/// `transactions:   5860   (2926.82 per sec.)` -> (5860, 2926.82).
fn counter_with_rate(report: &str, label: &str) -> Result<(u64, f64)> {
    let Some(value) = field(report, label) else {
        bail!("sysbench report has no \"{label}\" line");
    };
    let mut words = value.split_whitespace();
    let count = words.next().and_then(|w| w.parse().ok());
    let rate = words.next().and_then(|w| w.trim_start_matches('(').parse().ok());
    match (count, rate) {
        (Some(count), Some(rate)) => Ok((count, rate)),
        _ => bail!("cannot read sysbench line \"{label} {value}\""),
    }
}

/// The text after `label` on the first line containing it, trimmed.
fn field<'a>(report: &'a str, label: &str) -> Option<&'a str> {
    report.lines().find_map(|l| l.split_once(label).map(|(_, rest)| rest.trim()))
}

/// FATAL lines shown in an error; every client thread repeats its own.
const FATAL_SHOWN: usize = 3;

/// The first few distinct FATAL lines, and how many there were in all.
fn fatal_summary(fatal: &[&str]) -> String {
    let mut distinct: Vec<&str> = Vec::new();
    for line in fatal {
        if !distinct.contains(line) {
            distinct.push(line);
        }
    }
    let mut text = distinct.iter().take(FATAL_SHOWN).copied().collect::<Vec<_>>().join(" | ");
    if distinct.len() > FATAL_SHOWN {
        text.push_str(&format!(" | ... ({} FATAL lines, {} distinct)", fatal.len(), distinct.len()));
    }
    text
}

/// Lines like `       2.305 |************      41`. sysbench prints the
/// histogram once, wherever its output buffering puts it.
fn histogram(text: &str) -> Vec<(f64, u64)> {
    let mut buckets: Vec<(f64, u64)> = text
        .lines()
        .filter_map(|line| {
            let (value, bar) = line.split_once('|')?;
            let value: f64 = value.trim().parse().ok()?;
            let count: u64 = bar.split_whitespace().last()?.parse().ok()?;
            Some((value, count))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    buckets
}

/// The bucket value below which `pct` percent of the events fall, as sysbench
/// computes it (the first bucket whose running total reaches the share).
pub fn percentile(histogram: &[(f64, u64)], pct: f64) -> Option<f64> {
    let total: u64 = histogram.iter().map(|b| b.1).sum();
    if total == 0 {
        return None;
    }
    let want = total as f64 * pct / 100.0;
    let mut seen = 0u64;
    for &(value, count) in histogram {
        seen += count;
        if seen as f64 >= want {
            return Some(value);
        }
    }
    histogram.last().map(|b| b.0)
}

/// Several client processes of one run, as one measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct Combined {
    pub transactions: u64,
    pub tps: f64,
    pub ignored_errors: u64,
    pub p95_ms: Option<f64>,
}

pub fn combine(reports: &[Report]) -> Combined {
    let mut histogram: Vec<(f64, u64)> = reports.iter().flat_map(|r| r.histogram.iter().copied()).collect();
    histogram.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Processes share sysbench's fixed bucket boundaries; fold equal values.
    let mut merged: Vec<(f64, u64)> = Vec::with_capacity(histogram.len());
    for (value, count) in histogram {
        match merged.last_mut() {
            Some(last) if last.0 == value => last.1 += count,
            _ => merged.push((value, count)),
        }
    }
    // Without histograms (never seen with --histogram=on) fall back to the
    // worst client's own figure: pessimistic, never flattering.
    let fallback = reports.iter().filter_map(|r| r.p95_ms).reduce(f64::max);
    Combined {
        transactions: reports.iter().map(|r| r.transactions).sum(),
        tps: reports.iter().map(|r| r.tps).sum(),
        ignored_errors: reports.iter().map(|r| r.ignored_errors).sum(),
        p95_ms: percentile(&merged, PERCENTILE).or(fallback),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECKPOINTED: &str = include_str!("testdata/sysbench-checkpoint-histogram.txt");
    const NO_SERVER: &str = include_str!("testdata/sysbench-no-server.txt");
    const MISSING_TABLE: &str = include_str!("testdata/sysbench-missing-table.txt");
    const LEFT_PRIMARY: &str = include_str!("testdata/sysbench-node-left-primary.txt");

    #[test]
    fn final_report_after_checkpoints_is_read() {
        let r = parse(CHECKPOINTED).unwrap();
        // The last block, not the 1 s or 4 s checkpoint reports.
        assert_eq!(r.transactions, 2886);
        assert_eq!(r.tps, 2869.15);
        assert_eq!(r.ignored_errors, 18);
        assert_eq!(r.p95_ms, Some(2.35));
    }

    #[test]
    fn histogram_covers_the_final_window_and_gives_sysbench_percentile() {
        let r = parse(CHECKPOINTED).unwrap();
        let events: u64 = r.histogram.iter().map(|b| b.1).sum();
        assert_eq!(events, r.transactions);
        let ours = percentile(&r.histogram, PERCENTILE).unwrap();
        assert!((ours - r.p95_ms.unwrap()).abs() < 0.005, "{ours}");
        assert!(r.histogram.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn connection_failure_is_an_error_naming_the_cause() {
        let err = parse(NO_SERVER).unwrap_err().to_string();
        assert!(err.contains("Can't connect to local server"), "{err}");
    }

    #[test]
    fn sql_error_at_start_is_an_error() {
        let err = parse(MISSING_TABLE).unwrap_err().to_string();
        assert!(err.contains("sbtest3' doesn't exist"), "{err}");
    }

    #[test]
    fn a_node_leaving_mid_run_is_reported_in_a_few_lines() {
        // Every client thread prints its own FATAL lines (34 here).
        let err = parse(LEFT_PRIMARY).unwrap_err().to_string();
        assert!(err.contains("error 1047 (WSREP has not yet prepared node for application use)"), "{err}");
        assert!(err.ends_with("... (34 FATAL lines, 8 distinct)"), "{err}");
        assert_eq!(err.matches(" | ").count(), FATAL_SHOWN, "{err}");
    }

    #[test]
    fn truncated_output_is_an_error() {
        let cut = &CHECKPOINTED[..CHECKPOINTED.find("SQL statistics").unwrap()];
        assert!(parse(cut).is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn percentile_edges() {
        assert_eq!(percentile(&[], 95.0), None);
        let h = [(1.0, 94), (2.0, 1), (3.0, 5)];
        assert_eq!(percentile(&h, 95.0), Some(2.0));
        assert_eq!(percentile(&h, 94.0), Some(1.0));
        assert_eq!(percentile(&h, 100.0), Some(3.0));
    }

    #[test]
    fn combining_adds_counts_and_merges_histograms() {
        let fast =
            Report { transactions: 90, tps: 9.0, ignored_errors: 1, p95_ms: Some(1.0), histogram: vec![(1.0, 90)] };
        let slow = Report {
            transactions: 10,
            tps: 1.0,
            ignored_errors: 2,
            p95_ms: Some(50.0),
            histogram: vec![(1.0, 2), (50.0, 8)],
        };
        let c = combine(&[fast, slow]);
        assert_eq!(c.transactions, 100);
        assert_eq!(c.tps, 10.0);
        assert_eq!(c.ignored_errors, 3);
        // 92 of 100 events at 1 ms: the 95th is in the slow bucket.
        assert_eq!(c.p95_ms, Some(50.0));
    }

    #[test]
    fn combining_one_report_keeps_its_percentile() {
        let r = parse(CHECKPOINTED).unwrap();
        let c = combine(std::slice::from_ref(&r));
        assert_eq!(c.transactions, r.transactions);
        assert!((c.p95_ms.unwrap() - r.p95_ms.unwrap()).abs() < 0.005);
    }

    #[test]
    fn run_arguments() {
        let socket = Path::new("/d/node1/mysql.sock");
        let t = Target { socket, tables: 8, table_size: 100_000 };
        let args = run_args(&t, Workload::OltpUpdateIndex, 16, 3, 20, 7);
        assert_eq!(args[0], "oltp_update_index");
        for want in [
            "--mysql-socket=/d/node1/mysql.sock",
            "--tables=8",
            "--table-size=100000",
            "--threads=16",
            "--time=23",
            "--report-checkpoints=3",
            "--rand-seed=7",
            "--histogram=on",
        ] {
            assert!(args.contains(&want.to_string()), "{want} in {args:?}");
        }
        assert_eq!(args.last().unwrap(), "run");
        let cold = run_args(&t, Workload::OltpUpdateIndex, 1, 0, 5, 1);
        assert!(!cold.iter().any(|a| a.starts_with("--report-checkpoints")));
        let prepare = prepare_args(&t, 4);
        assert_eq!(prepare.last().unwrap(), "prepare");
        assert!(prepare.contains(&"--auto_inc=off".to_string()), "ids 1..N whatever the cluster's size");
    }

    #[test]
    fn fixed_work_and_steady_load_arguments() {
        let socket = Path::new("/d/node1/mysql.sock");
        let t = Target { socket, tables: 2, table_size: 10 };
        let args = events_args(&t, Workload::OltpWriteOnly, 16, 100_000, 3);
        assert_eq!(args[0], "oltp_write_only");
        for want in ["--threads=16", "--events=100000", "--time=0", "--rand-seed=3"] {
            assert!(args.contains(&want.to_string()), "{want} in {args:?}");
        }
        assert!(!args.iter().any(|a| a.starts_with("--report-checkpoints")));
        assert_eq!(args.last().unwrap(), "run");
        let args = steady_args(&t, Workload::OltpWriteOnly, 16, 1000, 60, 3);
        for want in ["--rate=1000", "--time=60"] {
            assert!(args.contains(&want.to_string()), "{want} in {args:?}");
        }
        assert_eq!(args.last().unwrap(), "run");
    }
}
