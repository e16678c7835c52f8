//! The SST cell: a full state transfer of the same data directory by
//! MariaDB's `mariabackup` method and by ours (`tandem`), side by side in
//! rounds, next to two raw `tar | socat | tar` copies of that directory:
//! one as an SST method of its own (`rawcopy`, the baseline the issue's
//! target is set against), one of the data phase alone.
//!
//! A 2-node Tandem cluster gets `--sst-gib` of sysbench data. Each round,
//! node 2 is stopped, its data directory emptied, its `wsrep_sst_method`
//! set, and it is started again: the time is from its start to Synced, so
//! the server's start and InnoDB's are in it for both methods alike. The
//! state transfer method is the joiner server's business, not the
//! provider's: the same comparison holds under Galera.
//!
//! `rawcopy` (the script `wsrep_sst_rawcopy` beside this file, written into
//! the cluster's `bin/`) is the prototype of `shared/reference/sst-contract.md`:
//! FLUSH TABLES WITH READ LOCK, two `tar | socat` streams straight into the
//! joiner's data directory, no checks, no staging, no fsync. It is timed
//! like the real methods, from the joiner's start to Synced. `raw` is the
//! data phase alone, on loopback, without fsync, outside any server: the
//! floor no method's data phase can beat.

use super::fc_cell::median;
use super::runner::{Bench, DataSet};
use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tandem::cluster::{Cluster, ClusterSpec, ProviderKind};

/// What each round measures, in this order. `tandem-lz4` and `tandem-zstd`
/// are the tandem method with the donor's `[sst] compression` set.
pub const METHODS: [&str; 6] = ["mariabackup", "tandem", "tandem-lz4", "tandem-zstd", "rawcopy", "raw"];
/// The baseline SST method, `wsrep_sst_method=rawcopy`.
const RAWCOPY_SCRIPT: &str = include_str!("wsrep_sst_rawcopy");
/// Starts the block this cell appends to the donor's option file.
const COMPRESSION_MARK: &str = "# tandem bench: the donor's SST compression";
/// sysbench rows per table per GiB of data directory (8 tables of 800,000
/// rows made a 2.08 GB data directory: `shared/reference/sst-contract.md`).
const ROWS_PER_GIB: f64 = 400_000.0;
const TABLES: u32 = 8;
const SYNCED_WITHIN: Duration = Duration::from_secs(900);

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SstRun {
    pub method: String,
    pub round: u32,
    pub error: Option<String>,
    /// Start of the joiner to Synced (raw: the copy), s.
    pub seconds: f64,
    /// The tandem method's own data phase, from its log line, s.
    #[serde(default)]
    pub data_phase_s: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SstCell {
    pub skipped: Option<String>,
    /// The donor's data directory, MiB (what the raw copy carries).
    pub datadir_mib: f64,
    pub rows_per_table: u32,
    pub runs: Vec<SstRun>,
}

impl SstCell {
    pub fn failed(&self) -> usize {
        self.runs.iter().filter(|r| r.error.is_some()).count() + usize::from(self.skipped.is_some())
    }

    fn median_of(&self, method: &str) -> Option<f64> {
        let ok: Vec<f64> =
            self.runs.iter().filter(|r| r.method == method && r.error.is_none()).map(|r| r.seconds).collect();
        (!ok.is_empty()).then(|| median(ok))
    }
}

pub fn runs(rounds: u32) -> Vec<(&'static str, u32)> {
    (0..rounds).flat_map(|r| METHODS.iter().map(move |m| (*m, r))).collect()
}

/// Runs the cell on a cluster of its own in `dir`; failures are recorded.
pub fn run(bench: &Bench, spec: ClusterSpec, gib: f64, rounds: u32, progress: &mut Progress) -> SstCell {
    let rows = (gib * ROWS_PER_GIB).round().max(1000.0) as u32;
    let mut cell = SstCell { skipped: None, datadir_mib: 0.0, rows_per_table: rows, runs: vec![] };
    progress.start(&format!("SST cell: a 2-node cluster with {TABLES} x {rows} rows"));
    let prepared = prepare(bench, spec, rows);
    let mut cluster = match prepared {
        Ok(c) => c,
        Err(e) => {
            progress.finish(&format!("SST cell: not run: {e:#}"));
            cell.skipped = Some(format!("{e:#}"));
            return cell;
        }
    };
    cell.datadir_mib = dir_bytes(&cluster.node(1).datadir) as f64 / (1 << 20) as f64;
    progress.finish(&format!("SST cell: {:.0} MiB data directory ready", cell.datadir_mib));
    for (method, round) in runs(rounds) {
        let what = format!("SST of {:.0} MiB by {method} (round {}/{rounds})", cell.datadir_mib, round + 1);
        progress.start(&what);
        let r = match method {
            "raw" => raw_copy(&cluster, bench.logs),
            m => transfer(&mut cluster, m),
        };
        let r = r.unwrap_or_else(|e| SstRun { error: Some(format!("{e:#}")), ..SstRun::default() });
        let r = SstRun { method: method.to_string(), round, ..r };
        progress.finish(&match &r.error {
            None => format!("{what}: {:.1} s", r.seconds),
            Some(e) => format!("{what}: FAILED: {e}"),
        });
        cell.runs.push(r);
    }
    cell
}

fn prepare(bench: &Bench, spec: ClusterSpec, rows: u32) -> Result<Cluster> {
    anyhow::ensure!(spec.nodes == 2 && spec.provider == ProviderKind::Tandem, "the SST cell runs on 2 Tandem nodes");
    let cluster = Cluster::up(spec).context("starting the SST cell's cluster")?;
    install_rawcopy(&cluster.dir().join("bin"))?;
    let data = Bench { data: DataSet { tables: TABLES, table_size: rows }, ..*bench };
    data.load(ProviderKind::Tandem, &cluster)?;
    Ok(cluster)
}

/// Node 2 from nothing to Synced by `method`.
fn transfer(cluster: &mut Cluster, method: &str) -> Result<SstRun> {
    cluster.stop(2)?;
    let node = cluster.node(2).clone();
    std::fs::remove_dir_all(&node.datadir)?;
    std::fs::create_dir(&node.datadir)?;
    let (method, compression) = match method.split_once('-') {
        Some((m, c)) => (m, Some(c)),
        None => (method, None),
    };
    set_method(&node.cnf, method)?;
    set_compression(&cluster.node(1).cnf, compression)?;
    let log_before = std::fs::metadata(&node.error_log).map_or(0, |m| m.len());
    let started = Instant::now();
    cluster.start(2)?;
    cluster.wait_synced(2, SYNCED_WITHIN)?;
    let seconds = started.elapsed().as_secs_f64();
    let log = std::fs::read_to_string(&node.error_log).unwrap_or_default();
    let log = log.get(log_before as usize..).unwrap_or_default();
    let ran = format!("Running: 'wsrep_sst_{method} --role 'joiner'");
    if !log.contains(&ran) {
        bail!("node 2 did not run the {method} method's joiner (no \"{ran}\" in its log)");
    }
    let (a, b) = (cluster.node(1).sql("CHECKSUM TABLE sbtest.sbtest1")?, node.sql("CHECKSUM TABLE sbtest.sbtest1")?);
    if a != b {
        bail!("after the transfer node 2's sbtest1 differs: {b:?} vs {a:?}");
    }
    Ok(SstRun { seconds, data_phase_s: data_phase(log), ..SstRun::default() })
}

/// `WSREP_SST: [INFO] Received N files, X MiB in S s over ...`: S.
fn data_phase(log: &str) -> Option<f64> {
    let line = log.lines().rev().find(|l| l.contains("WSREP_SST: [INFO] Received "))?;
    let after = &line[line.find(" in ")? + 4..];
    after.split(' ').next()?.parse().ok()
}

/// Writes `wsrep_sst_rawcopy` into `bin`, the directory first on every
/// node's PATH (where the cluster puts `wsrep_sst_tandem`).
fn install_rawcopy(bin: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(bin)?;
    let path = bin.join("wsrep_sst_rawcopy");
    std::fs::write(&path, RAWCOPY_SCRIPT).with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

fn set_method(cnf: &Path, method: &str) -> Result<()> {
    let text = std::fs::read_to_string(cnf)?;
    let mut found = false;
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with("wsrep_sst_method=") {
                found = true;
                format!("wsrep_sst_method={method}")
            } else {
                l.to_string()
            }
        })
        .collect();
    anyhow::ensure!(found, "{} has no wsrep_sst_method line", cnf.display());
    std::fs::write(cnf, lines.join("\n") + "\n")?;
    Ok(())
}

/// Sets (or, with `None`, removes) the donor's `[sst] compression`, in a
/// block of its own at the end of its option file.
fn set_compression(cnf: &Path, compression: Option<&str>) -> Result<()> {
    let text = std::fs::read_to_string(cnf)?;
    let mut text = match text.find(COMPRESSION_MARK) {
        Some(at) => text[..at].to_string(),
        None => text,
    };
    if let Some(how) = compression {
        text.push_str(&format!("{COMPRESSION_MARK}\n[sst]\ncompression={how}\n"));
    }
    std::fs::write(cnf, text)?;
    Ok(())
}

/// `tar | socat -b1M | tar` of what the methods send from node 1's data
/// directory (not its own group log, logs or state files), on loopback: the
/// data phase of a copy with no protocol, no checks and no fsync.
fn raw_copy(cluster: &Cluster, logs: &Path) -> Result<SstRun> {
    let src = cluster.node(1).datadir.clone();
    let dest: PathBuf = logs.join("sst-raw-copy");
    let _ = std::fs::remove_dir_all(&dest);
    std::fs::create_dir_all(&dest)?;
    let sent = tandem::sst::files::inventory(&src, &tandem::sst::files::Binlog::default())?;
    let list = logs.join("sst-raw-copy.list");
    let names: Vec<&str> = sent.dirs.iter().chain(&sent.files).map(|e| e.path.as_str()).collect();
    std::fs::write(&list, names.join("\n") + "\n")?;
    let reserved: Vec<u16> = cluster.nodes().iter().flat_map(tandem::cluster::Node::reserved_ports).collect();
    let port = tandem::cluster::ports::spare(1, &reserved)?[0];
    let shell = |script: String| {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script).stdout(Stdio::null()).stderr(Stdio::piped());
        cmd
    };
    let started = Instant::now();
    // The receiver's complaints go to a file: a pipe nobody reads while the
    // copy runs would stop it once full (a full disk makes tar say a lot).
    let receiver_log = logs.join("sst-raw-copy.receiver.log");
    let receiver = shell(format!(
        "socat -u -b1048576 TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr - | tar -C '{}' -xf - 2>'{}'",
        dest.display(),
        receiver_log.display()
    ))
    .spawn()?;
    let sender = loop {
        let out = shell(format!(
            "tar -C '{}' --no-recursion -cf - -T '{}' | socat -u -b1048576 - TCP:127.0.0.1:{port}",
            src.display(),
            list.display()
        ))
        .output()?;
        if out.status.success() || started.elapsed() > Duration::from_secs(10) {
            break out;
        }
        std::thread::sleep(Duration::from_millis(20)); // the listener is not up yet
    };
    let received = receiver.wait_with_output()?;
    let seconds = started.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&dest);
    if !sender.status.success() || !received.status.success() {
        // Either end may be the one that failed (a full disk fails the receiver).
        let said = |out: &[u8]| String::from_utf8_lossy(out).lines().take(3).collect::<Vec<_>>().join("; ");
        let receiver_said = std::fs::read(&receiver_log).unwrap_or_default();
        bail!(
            "raw copy failed: sender: {}; receiver: {} {}",
            said(&sender.stderr),
            said(&received.stderr),
            said(&receiver_said)
        );
    }
    Ok(SstRun { seconds, ..SstRun::default() })
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

/// The report's section.
pub fn render(out: &mut String, c: &SstCell) {
    let _ = writeln!(out, "## State transfer (SST): the tandem method against mariabackup\n");
    if let Some(why) = &c.skipped {
        let _ = writeln!(out, "Not run: {why}.\n");
        return;
    }
    let rounds = c.runs.iter().map(|r| r.round + 1).max().unwrap_or(0);
    let _ = writeln!(
        out,
        "A 2-node Tandem cluster with {TABLES} sysbench tables of {} rows ({:.0} MiB data directory on node 1). Each\n\
         round empties node 2's data directory and starts it with `wsrep_sst_method` set; the time is from its\n\
         start to Synced (server and InnoDB start included, for every method alike). `tandem-lz4` and\n\
         `tandem-zstd` are the tandem method with the donor's `[sst] compression=lz4` or `zstd` (level 1).\n\
         `rawcopy` is the raw copy as an SST method, the baseline of the issue's target (the prototype of\n\
         `shared/reference/sst-contract.md`, `crates/lab/src/bench/wsrep_sst_rawcopy`): FLUSH TABLES WITH READ\n\
         LOCK, then two `tar | socat -b1M | tar` streams straight into the joiner's data directory, with no\n\
         checksums, no staging directory and no fsync. `raw copy` is one `tar | socat -b1M | tar` of the same\n\
         files over loopback, outside any server: the data phase alone. {rounds} round(s), in turn; median.\n",
        c.rows_per_table, c.datadir_mib
    );
    let _ = writeln!(out, "| Method | runs (s) | median s | vs mariabackup | vs `rawcopy` |\n|---|---|---:|---:|---:|");
    let (mb, rawcopy, raw) = (c.median_of("mariabackup"), c.median_of("rawcopy"), c.median_of("raw"));
    let ratio = |m: f64, base: Option<f64>| base.map_or("".to_string(), |b| format!("{:.2}", m / b));
    for method in METHODS {
        let all: Vec<String> = c
            .runs
            .iter()
            .filter(|r| r.method == method)
            .map(|r| if r.error.is_some() { "failed".into() } else { format!("{:.2}", r.seconds) })
            .collect();
        if all.is_empty() {
            continue;
        }
        let label = if method == "raw" { "raw copy (data phase)".to_string() } else { format!("`{method}`") };
        match c.median_of(method) {
            // The data phase alone is not a state transfer: no ratio to SSTs.
            Some(m) if method == "raw" => {
                let _ = writeln!(out, "| {label} | {} | {m:.2} | | |", all.join(", "));
            }
            Some(m) => {
                let _ = writeln!(
                    out,
                    "| {label} | {} | {m:.2} | {} | {} |",
                    all.join(", "),
                    ratio(m, mb),
                    ratio(m, rawcopy)
                );
            }
            None => {
                let _ = writeln!(out, "| {label} | {} | failed | | |", all.join(", "));
            }
        }
    }
    let phases: Vec<f64> =
        c.runs.iter().filter(|r| r.method == "tandem" && r.error.is_none()).filter_map(|r| r.data_phase_s).collect();
    if !phases.is_empty() {
        let phase = median(phases);
        let _ = writeln!(
            out,
            "\nThe tandem method's own data phase (its joiner's \"Received ... in S s\": every stream received and\n\
             checked, before the `syncfs` and the swap): median {phase:.2} s{}.",
            raw.map_or(String::new(), |r| format!(", {:.2}x the raw copy's data phase", phase / r))
        );
    }
    for r in c.runs.iter().filter(|r| r.error.is_some()) {
        let _ = writeln!(out, "\n- {} round {} failed: {}", r.method, r.round + 1, r.error.as_deref().unwrap_or(""));
    }
    let _ = writeln!(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_phase_is_read_from_the_joiners_line() {
        let log = "x\nWSREP_SST: [INFO] Received 218 files, 174.0 MiB in 0.34 s over 2 streams, TLS (542 MB/s), \
                   installed in 0.13 s: u:5 0 (2026-11-25 09:32:36 UTC)\n";
        assert_eq!(data_phase(log), Some(0.34));
        assert_eq!(data_phase("nothing"), None);
    }

    #[test]
    fn the_report_gives_ratios_against_both_baselines() {
        let run = |method: &str, round, seconds| SstRun { method: method.into(), round, seconds, ..SstRun::default() };
        let cell = SstCell {
            skipped: None,
            datadir_mib: 2000.0,
            rows_per_table: 800_000,
            runs: vec![
                run("mariabackup", 0, 20.0),
                run("tandem", 0, 5.0),
                run("rawcopy", 0, 4.0),
                run("raw", 0, 2.5),
                SstRun { error: Some("boom".into()), ..run("tandem", 1, 0.0) },
                SstRun { data_phase_s: Some(2.0), ..run("tandem", 2, 6.0) },
            ],
        };
        let mut out = String::new();
        render(&mut out, &cell);
        assert!(out.contains("| `tandem` | 5.00, failed, 6.00 | 5.50 | 0.28 | 1.38 |"), "{out}");
        assert!(out.contains("| `mariabackup` | 20.00 | 20.00 | 1.00 | 5.00 |"), "{out}");
        assert!(out.contains("| `rawcopy` | 4.00 | 4.00 | 0.20 | 1.00 |"), "{out}");
        assert!(out.contains("| raw copy (data phase) | 2.50 | 2.50 | | |"), "{out}");
        assert!(out.contains("median 2.00 s, 0.80x the raw copy's data phase"), "{out}");
        assert!(out.contains("tandem round 2 failed: boom"), "{out}");
    }

    /// The baseline method run by hand, both roles, with this test playing
    /// the servers: what it copies, what it leaves, the position it reports.
    #[test]
    fn the_rawcopy_method_copies_the_data_and_reports_the_donors_position() {
        use std::io::{BufRead, BufReader};
        let dir = tempfile::tempdir().unwrap();
        install_rawcopy(&dir.path().join("bin")).unwrap();
        let script = dir.path().join("bin/wsrep_sst_rawcopy");
        let (donor_dir, joiner_dir) = (dir.path().join("donor"), dir.path().join("joiner"));
        for d in ["sbtest", "empty_schema", "mysql"] {
            std::fs::create_dir_all(donor_dir.join(d)).unwrap();
        }
        std::fs::create_dir_all(&joiner_dir).unwrap();
        let data: [(&str, Vec<u8>); 5] = [
            ("aria_log.00000001", b"not a .log file".to_vec()),
            ("ibdata1", (0..300_000u32).map(|i| (i * 7) as u8).collect()),
            ("sbtest/sbtest1.ibd", vec![1; 2_000_000]),
            ("sbtest/sbtest2.ibd", vec![2; 1_500_000]),
            ("mysql/user.MAI", b"x".to_vec()),
        ];
        for (name, bytes) in &data {
            std::fs::write(donor_dir.join(name), bytes).unwrap();
        }
        let own = ["grastate.dat", "gvwstate.dat", "galera.cache", "node.err", "mariadbd.pid", "wsrep_recovery.ok"];
        for name in own {
            std::fs::write(donor_dir.join(name), b"the donor's own").unwrap();
        }
        let spawn = |role: &str, address: &str, datadir: &Path| {
            Command::new("bash")
                .arg(&script)
                .args(["--role", role, "--address", address, "--datadir"])
                .arg(format!("{}/", datadir.display()))
                .args(["--gtid", "u:5", "--mysqld-args", "--role", "ignored"])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        };
        let port = tandem::cluster::ports::random_port();
        let mut joiner = spawn("joiner", &format!("127.0.0.1:{port}"), &joiner_dir);
        let mut joiner_out = BufReader::new(joiner.stdout.take().unwrap()).lines();
        let ready = joiner_out.next().unwrap().unwrap();
        assert_eq!(ready, format!("ready 127.0.0.1:{port}/rawcopy"));
        let mut donor = spawn("donor", ready.strip_prefix("ready ").unwrap(), &donor_dir);
        let mut donor_out = BufReader::new(donor.stdout.take().unwrap()).lines();
        assert_eq!(donor_out.next().unwrap().unwrap(), "flush tables");
        // What the donor's server does once FLUSH TABLES WITH READ LOCK holds.
        std::fs::write(donor_dir.join("tables_flushed.tmp"), "u:7 0\n").unwrap();
        std::fs::rename(donor_dir.join("tables_flushed.tmp"), donor_dir.join("tables_flushed")).unwrap();
        let said: Vec<String> = donor_out.map(|l| l.unwrap()).collect();
        assert_eq!(said, ["continue", "done u:7"]);
        assert!(donor.wait().unwrap().success());
        let said: Vec<String> = joiner_out.map(|l| l.unwrap()).collect();
        assert_eq!(said, ["u:7 0"]);
        assert!(joiner.wait().unwrap().success());
        for (name, bytes) in &data {
            assert_eq!(&std::fs::read(joiner_dir.join(name)).unwrap(), bytes, "{name}");
        }
        assert!(joiner_dir.join("empty_schema").is_dir());
        for name in own.iter().chain(&["tables_flushed"]) {
            assert!(!joiner_dir.join(name).exists(), "{name} was copied");
        }
    }

    /// The script writes the rule of a node's own files again, as a regular
    /// expression (it runs under mariadbd, outside our binary). Both must
    /// leave out the same top-level names, or the baseline would copy more
    /// or less than the method it is measured against. One difference is
    /// on purpose: the donor's `tables_flushed` goes over with the data.
    #[test]
    fn the_rawcopy_script_leaves_out_the_same_files_as_the_tandem_method() {
        use std::io::Write;
        let quoted = |line: &str, open: char| {
            let start = line.find(open).unwrap() + 1;
            line[start..line.rfind(open).unwrap()].to_string()
        };
        let first = RAWCOPY_SCRIPT.lines().find(|l| l.contains("local own='")).expect("the own= line");
        let second = RAWCOPY_SCRIPT.lines().find(|l| l.contains("own=\"$own|")).expect("the own+= line");
        let pattern = format!("{}|{}", quoted(first, '\''), quoted(second, '"').trim_start_matches("$own|"));
        let names = [
            "galera.cache",
            "node1.galera.cache",
            "grastate.dat",
            "gvwstate.dat",
            "sst_in_progress",
            tandem::sst::files::STAGING,
            tandem_health::sst_progress::FILE_NAME,
            "tables_flushed.tmp",
            "sst_error",
            "sst_error.log",
            "node.err",
            "mysqld.log",
            "mariadbd.pid",
            "mysql.sock",
            "mysql.sock.lock",
            "wsrep_recovery.ok",
            "wsrep_recovery.fail",
            // Data: sent by both.
            "ibdata1",
            "ib_logfile0",
            "ib_buffer_pool",
            "aria_log.00000001",
            "aria_log_control",
            "mysql",
            "sbtest",
            "undo001",
            "ibtmp1",
            "mariadb-bin.000001",
            "mariadb-bin.index",
            "log_data",
            "grastate",
        ];
        let mut grep =
            Command::new("grep").args(["-E", &pattern]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let input = names.iter().chain(&["tables_flushed"]).copied().collect::<Vec<_>>().join("\n");
        grep.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let out = grep.wait_with_output().unwrap();
        let left_out: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
        for name in names {
            assert_eq!(
                left_out.contains(&name),
                tandem::sst::files::is_node_own(name),
                "{name}: the script (/{pattern}/) and files::is_node_own disagree"
            );
        }
        assert!(tandem::sst::files::is_node_own("tables_flushed") && !left_out.contains(&"tables_flushed"));
    }

    #[test]
    fn the_donors_compression_is_set_and_removed_whole() {
        let dir = tempfile::tempdir().unwrap();
        let cnf = dir.path().join("my.cnf");
        std::fs::write(&cnf, "[mysqld]\nport=1\n").unwrap();
        set_compression(&cnf, Some("lz4")).unwrap();
        set_compression(&cnf, Some("zstd")).unwrap();
        let text = std::fs::read_to_string(&cnf).unwrap();
        assert_eq!(text.matches("compression=").count(), 1, "{text}");
        assert!(text.ends_with("[sst]\ncompression=zstd\n"), "{text}");
        set_compression(&cnf, None).unwrap();
        assert_eq!(std::fs::read_to_string(&cnf).unwrap(), "[mysqld]\nport=1\n");
    }

    #[test]
    fn the_method_line_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let cnf = dir.path().join("my.cnf");
        std::fs::write(&cnf, "[mysqld]\nwsrep_sst_method=mariabackup\nport=1\n").unwrap();
        set_method(&cnf, "tandem").unwrap();
        assert_eq!(std::fs::read_to_string(&cnf).unwrap(), "[mysqld]\nwsrep_sst_method=tandem\nport=1\n");
        std::fs::write(&cnf, "[mysqld]\n").unwrap();
        assert!(set_method(&cnf, "tandem").is_err());
    }
}
