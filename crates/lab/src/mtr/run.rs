//! Running mariadb-test-run.pl for one provider: prerequisites, the provider
//! snapshot, the expected test list (`--dry-run`) and the run itself, with
//! its output kept verbatim in `mtr.log` and shown as progress.

use super::parse::{self, Outcome};
use super::progress::Progress;
use super::run_as::RunAs;
use super::{host, quote_command, Provider};
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tandem::cluster::prereq::find_program;
use tandem::time_fmt;

pub const DEFAULT_MTR_DIR: &str = "/usr/share/mysql/mysql-test";
pub const MTR_DIR_ENV: &str = "MTR_DIR";
pub const LOG_FILE: &str = "mtr.log";
pub const RECORD_FILE: &str = "run.json";

/// MTR's installation, checked.
#[derive(Clone, Debug)]
pub struct MtrEnv {
    pub dir: PathBuf,
    pub perl: PathBuf,
}

/// Everything a run needs that is not installed with MariaDB's server: stop
/// early with what to install instead of failing in the middle of MTR.
pub fn check_environment() -> Result<MtrEnv> {
    let dir = std::env::var_os(MTR_DIR_ENV)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_MTR_DIR), PathBuf::from);
    if !dir.join("mariadb-test-run.pl").is_file() {
        bail!(
            "mariadb-test is not installed: {} is missing (apt-get install mariadb-test, \
             or point {MTR_DIR_ENV} at a mysql-test directory)",
            dir.join("mariadb-test-run.pl").display()
        );
    }
    let perl =
        find_program("perl").map_err(|_| anyhow!("perl not found: MTR is a perl program (apt-get install perl)"))?;
    if find_program("mariabackup").is_err() && find_program("mariadb-backup").is_err() {
        bail!(
            "mariabackup not found: MTR's servers are started with \
             --wsrep_sst_method=mariabackup (rsync SST fails as root); apt-get install mariadb-backup"
        );
    }
    find_program("socat")
        .map_err(|_| anyhow!("socat not found: mariabackup SST streams through it (apt-get install socat)"))?;
    Ok(MtrEnv { dir, perl })
}

impl MtrEnv {
    pub fn check_suite(&self, suite: &str) -> Result<()> {
        if !self.dir.join("suite").join(suite).join("t").is_dir() {
            bail!("MTR suite '{suite}' not found: no {}", self.dir.join("suite").join(suite).join("t").display());
        }
        Ok(())
    }

    /// `suite.name` must be a `.test` file of an installed suite; MTR would
    /// otherwise abort the whole run on the unknown name.
    pub fn check_test(&self, test: &str) -> Result<()> {
        let Some((suite, name)) = test.split_once('.') else {
            bail!("test name {test:?} has no suite");
        };
        self.check_suite(suite)?;
        let file = self.dir.join("suite").join(suite).join("t").join(format!("{name}.test"));
        if !file.is_file() {
            bail!("unknown MTR test {test}: no {}", file.display());
        }
        Ok(())
    }

    /// MTR runs `wsrep_check_version -p` on `$WSREP_PROVIDER` and skips the
    /// whole galera suite when it fails: check it first and say so.
    pub fn check_provider(&self, kind: Provider, library: &Path) -> Result<()> {
        let check = self.dir.join("lib/My/SafeProcess/wsrep_check_version");
        if !check.is_file() {
            return Ok(());
        }
        let out = Command::new(&check)
            .arg("-p")
            .env("WSREP_PROVIDER", library)
            .output()
            .with_context(|| format!("cannot run {}", check.display()))?;
        if !out.status.success() {
            bail!(
                "{kind} provider {} is rejected by MTR's wsrep_check_version (MTR would skip \
                 the galera suites): {}{}",
                library.display(),
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }
}

/// What to run for one provider.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub provider: Provider,
    /// The library as the user named it (it is copied before the run).
    pub library: PathBuf,
    /// `OUT/<provider>`.
    pub dir: PathBuf,
    pub parallel: usize,
    pub testcase_timeout_min: u32,
    /// Whole suites (`--suite=`) when `tests` is empty.
    pub suites: Vec<String>,
    pub tests: Vec<String>,
    pub extra: Vec<String>,
    /// `--run-as`: MTR runs as this user, not as the caller.
    pub run_as: Option<RunAs>,
}

/// What happened, kept as `OUT/<provider>/run.json` so that the report can be
/// made again from the logs (`--reparse`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub provider: Provider,
    pub library: PathBuf,
    /// The copy the servers loaded.
    pub loaded: PathBuf,
    pub md5: String,
    pub library_mtime: u64,
    pub mtr_dir: PathBuf,
    /// `WSREP_PROVIDER=... perl ./mariadb-test-run.pl ...`, run in `mtr_dir`.
    pub mtr_command: String,
    pub parallel: usize,
    pub testcase_timeout_min: u32,
    pub suites: Vec<String>,
    /// The tests MTR was expected to report (its `--dry-run` list, else the
    /// tests asked for); empty if unknown.
    pub expected: Vec<String>,
    pub started: u64,
    pub elapsed_s: f64,
    /// MTR's exit status (None: killed by a signal).
    pub exit_code: Option<i32>,
    /// The signal that killed MTR, if one did.
    #[serde(default)]
    pub exit_signal: Option<i32>,
}

impl RunRecord {
    /// "0", "1", "killed by signal 6".
    pub fn exit_text(&self) -> String {
        match (self.exit_code, self.exit_signal) {
            (Some(code), _) => code.to_string(),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            (None, None) => "killed by a signal".to_string(),
        }
    }

    pub fn load(dir: &Path) -> Result<RunRecord> {
        let path = dir.join(RECORD_FILE);
        let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("cannot parse {}", path.display()))
    }

    fn save(&self, dir: &Path) -> Result<()> {
        let path = dir.join(RECORD_FILE);
        std::fs::write(&path, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))
    }
}

/// The MTR options every run gets (see docs/compatibility.md and notes.md:
/// rsync SST fails as root, hence mariabackup; `--timestamp --timediff` give
/// per-test wall time).
pub fn mtr_args(spec: &RunSpec, dir: &Path) -> Vec<String> {
    let mut args = vec![
        format!("--vardir={}", dir.join("var").display()),
        format!("--parallel={}", spec.parallel),
        "--force".into(),
        "--retry=0".into(),
        "--max-test-fail=0".into(),
        format!("--testcase-timeout={}", spec.testcase_timeout_min),
        "--timestamp".into(),
        "--timediff".into(),
        format!("--xml-report={}", dir.join("report.xml").display()),
        "--mysqld=--wsrep_sst_method=mariabackup".into(),
        "--mysqld=--wsrep_sst_auth=root:".into(),
    ];
    args.extend(selection_args(spec));
    args
}

/// The run's arguments with another vardir and no report file.
fn dry_run_args(spec: &RunSpec, vardir: &Path) -> Vec<String> {
    let mut args = vec![format!("--vardir={}", vardir.display())];
    args.extend(
        mtr_args(spec, &spec.dir)
            .into_iter()
            .filter(|a| !a.starts_with("--vardir=") && !a.starts_with("--xml-report=")),
    );
    args
}

/// `--suite=a,b` or the test names, after the extra MTR arguments.
fn selection_args(spec: &RunSpec) -> Vec<String> {
    let mut args = spec.extra.clone();
    if spec.tests.is_empty() {
        args.push(format!("--suite={}", spec.suites.join(",")));
    } else {
        args.extend(spec.tests.iter().cloned());
    }
    args
}

/// Copies the library, runs MTR for one provider and records the run.
pub fn run_provider(env: &MtrEnv, spec: &RunSpec, progress: &mut Progress) -> Result<RunRecord> {
    let dir = &spec.dir;
    std::fs::create_dir_all(dir.join("provider")).with_context(|| format!("cannot create {}", dir.display()))?;
    // Rebuilding target/release/libtandem.so during a run must not mix two
    // builds in one run: the servers load a copy.
    let file_name =
        spec.library.file_name().ok_or_else(|| anyhow!("provider path {} has no file name", spec.library.display()))?;
    let loaded = dir.join("provider").join(file_name);
    std::fs::copy(&spec.library, &loaded)
        .with_context(|| format!("cannot copy {} to {}", spec.library.display(), loaded.display()))?;
    if let Some(user) = &spec.run_as {
        user.prepare_dir(dir)?;
    }
    let md5 = host::md5(&loaded)?;
    let library_mtime = host::mtime_unix(&spec.library);

    progress.say(&format!(
        "{}: {} (md5 {md5}, built {}), loaded from a copy in {}",
        spec.provider,
        spec.library.display(),
        time_fmt::utc(library_mtime),
        loaded.display()
    ));

    let expected = match dry_run(env, spec, &loaded) {
        Ok(list) if !list.is_empty() => list,
        Ok(_) => spec.tests.clone(),
        Err(e) => {
            progress.say(&format!(
                "{}: could not count the tests in advance ({e:#}); counting as they finish",
                spec.provider
            ));
            spec.tests.clone()
        }
    };

    let args = mtr_args(spec, dir);
    let mtr_command = format!(
        "{}WSREP_PROVIDER={} perl ./mariadb-test-run.pl {}",
        spec.run_as.as_ref().map_or(String::new(), |u| format!("runuser -u {} -- env ", u.name)),
        quote_command([loaded.display().to_string()]),
        quote_command(&args)
    );
    let log_path = dir.join(LOG_FILE);
    let mut log = std::fs::File::create(&log_path).with_context(|| format!("cannot create {}", log_path.display()))?;
    let started = host::now_unix();
    writeln!(
        log,
        "# tandem-lab mtr {} provider={} library={} md5={md5} mtime={}\n# cd {} && {mtr_command}",
        time_fmt::utc(started),
        spec.provider,
        spec.library.display(),
        time_fmt::utc(library_mtime),
        env.dir.display()
    )?;
    let what = if spec.tests.is_empty() {
        format!("suites {}", spec.suites.join(","))
    } else {
        format!("{} listed test(s)", spec.tests.len())
    };
    let count = if expected.is_empty() { String::new() } else { format!("{} tests, ", expected.len()) };
    progress.say(&format!(
        "{}: running MTR: {what} ({count}--parallel {}, --testcase-timeout {} min); log {}",
        spec.provider,
        spec.parallel,
        spec.testcase_timeout_min,
        log_path.display()
    ));

    let clock = Instant::now();
    progress.start(&spec.provider.to_string(), (!expected.is_empty()).then_some(expected.len()));
    let status = stream_mtr(env, &loaded, &args, spec.run_as.as_ref(), &mut log, progress);
    progress.finish();
    let elapsed_s = clock.elapsed().as_secs_f64();
    let status = status?;
    writeln!(
        log,
        "# mtr exit status {}, elapsed {:.0}s",
        status.code().map_or("signal".to_string(), |c| c.to_string()),
        elapsed_s
    )?;

    let record = RunRecord {
        provider: spec.provider,
        library: spec.library.clone(),
        loaded,
        md5,
        library_mtime,
        mtr_dir: env.dir.clone(),
        mtr_command,
        parallel: spec.parallel,
        testcase_timeout_min: spec.testcase_timeout_min,
        suites: spec.suites.clone(),
        expected,
        started,
        elapsed_s,
        exit_code: status.code(),
        exit_signal: std::os::unix::process::ExitStatusExt::signal(&status),
    };
    record.save(dir)?;
    Ok(record)
}

/// The test names MTR will report, from `--dry-run` (a few seconds: it
/// collects the tests and lists them, skipped and disabled ones included).
/// It gets the run's own options: MTR drops a combination that a `--mysqld=`
/// option overrides (`galera_3nodes.MDEV-29171 'rsync'` with
/// `--mysqld=--wsrep_sst_method=mariabackup`).
fn dry_run(env: &MtrEnv, spec: &RunSpec, loaded: &Path) -> Result<Vec<String>> {
    let vardir = spec.dir.join("dry-run-var");
    let mut cmd = Command::new(&env.perl);
    cmd.arg("./mariadb-test-run.pl")
        .arg("--dry-run")
        .args(dry_run_args(spec, &vardir))
        .current_dir(&env.dir)
        .env("WSREP_PROVIDER", loaded);
    if let Some(user) = &spec.run_as {
        user.apply(&mut cmd);
    }
    let out = cmd.output().context("cannot run mariadb-test-run.pl --dry-run")?;
    let _ = std::fs::remove_dir_all(&vardir);
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stderr);
        bail!("mariadb-test-run.pl --dry-run failed: {}", text.lines().last().unwrap_or("").trim());
    }
    Ok(dry_run_names(&String::from_utf8_lossy(&out.stdout)))
}

/// The test lines of `--dry-run` output: `suite.name` or `suite.name 'combination'`.
pub fn dry_run_names(stdout: &str) -> Vec<String> {
    let re = regex::Regex::new(r"^[A-Za-z0-9_\-]+\.\S+(?: '[^']*')?$").expect("static regex");
    stdout.lines().map(str::trim_end).filter(|l| re.is_match(l) && !l.ends_with("...")).map(str::to_string).collect()
}

enum Event {
    Line(String),
    Eof,
}

/// Runs MTR with stdout and stderr merged into one pipe (the failure reports
/// and MTR's own errors must stay in order), copying every line to the log.
fn stream_mtr(
    env: &MtrEnv,
    loaded: &Path,
    args: &[String],
    run_as: Option<&RunAs>,
    log: &mut std::fs::File,
    progress: &mut Progress,
) -> Result<std::process::ExitStatus> {
    let (reader, writer) = std::io::pipe().context("cannot create a pipe")?;
    let mut child = {
        let mut cmd = Command::new(&env.perl);
        cmd.arg("./mariadb-test-run.pl")
            .args(args)
            .current_dir(&env.dir)
            .env("WSREP_PROVIDER", loaded)
            .stdin(std::process::Stdio::null())
            .stdout(writer.try_clone()?)
            .stderr(writer);
        if let Some(user) = run_as {
            user.apply(&mut cmd);
        }
        cmd.spawn().context("cannot start mariadb-test-run.pl")?
        // `cmd` and with it our copies of the pipe's write end are dropped
        // here, so the reader sees EOF when MTR exits.
    };
    let (tx, rx) = mpsc::channel();
    let reader_thread = std::thread::spawn(move || {
        let mut reader = BufReader::new(reader);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf).trim_end_matches(['\n', '\r']).to_string();
                    if tx.send(Event::Line(line)).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = tx.send(Event::Eof);
    });
    loop {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(Event::Line(line)) => {
                writeln!(log, "{line}")?;
                if let Some(r) = parse::result_line(&line) {
                    progress.result(&r.test, r.outcome);
                } else if let Some(phase) = phase(&line) {
                    progress.status(phase);
                }
            }
            Ok(Event::Eof) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => progress.tick(),
        }
    }
    let _ = reader_thread.join();
    log.flush()?;
    child.wait().context("waiting for mariadb-test-run.pl")
}

/// MTR's start-up steps, shown before the first result.
fn phase(line: &str) -> Option<&'static str> {
    [
        ("Checking supported features", "checking supported features"),
        ("Collecting tests", "collecting tests"),
        ("Installing system database", "installing the system database"),
        ("Using MTR_BUILD_THREAD", "starting workers"),
    ]
    .into_iter()
    .find(|(needle, _)| line.contains(needle))
    .map(|(_, phase)| phase)
}

/// The outcome counts of a finished run, for the one-line summary.
pub fn summary_line(parsed: &parse::Parsed) -> String {
    Outcome::ALL
        .iter()
        .filter_map(|&o| {
            let n = parsed.count(o);
            (n > 0).then(|| format!("{n} {o}"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dry_run_lists_tests_only() {
        let out = "Logging: ./mariadb-test-run.pl  --dry-run --suite=galera,galera_3nodes\n\
                   vardir: /tmp/x/var\n\
                   MariaDB Version 10.11.19-MariaDB-0+deb12u1\n\
                   Collecting tests...\n\
                   Installing system database...\n\
                   galera.GAL-419\n\
                   galera.MW-402 'binlogon'\n\
                   galera.galera#505\n\
                   galera_3nodes.galera_garbd\n";
        assert_eq!(
            dry_run_names(out),
            ["galera.GAL-419", "galera.MW-402 'binlogon'", "galera.galera#505", "galera_3nodes.galera_garbd"]
        );
    }

    #[test]
    fn mtr_arguments() {
        let spec = RunSpec {
            provider: Provider::Tandem,
            library: "/x/libtandem.so".into(),
            dir: "/o/tandem".into(),
            parallel: 2,
            testcase_timeout_min: 5,
            suites: vec!["galera".into(), "galera_3nodes".into()],
            tests: vec![],
            extra: vec!["--big-test".into()],
            run_as: None,
        };
        let args = mtr_args(&spec, Path::new("/o/tandem"));
        assert_eq!(args[0], "--vardir=/o/tandem/var");
        assert!(args.contains(&"--mysqld=--wsrep_sst_method=mariabackup".to_string()));
        assert!(args.contains(&"--testcase-timeout=5".to_string()));
        assert_eq!(&args[args.len() - 2..], ["--big-test", "--suite=galera,galera_3nodes"]);
        let spec = RunSpec { tests: vec!["galera.basic".into()], ..spec };
        assert_eq!(mtr_args(&spec, Path::new("/o")).last().unwrap(), "galera.basic");
        // The dry run sees the same --mysqld options (they decide which
        // combinations exist), with its own vardir and no report.
        let dry = dry_run_args(&spec, Path::new("/o/tandem/dry-run-var"));
        assert_eq!(dry[0], "--vardir=/o/tandem/dry-run-var");
        assert_eq!(dry.iter().filter(|a| a.starts_with("--vardir=")).count(), 1);
        assert!(!dry.iter().any(|a| a.starts_with("--xml-report=")));
        assert!(dry.contains(&"--mysqld=--wsrep_sst_method=mariabackup".to_string()));
        assert_eq!(dry.last().unwrap(), "galera.basic");
    }
}
