//! `tandem-lab mtr`: MariaDB's own galera MTR suites (package `mariadb-test`)
//! run once with Galera and once with Tandem, and `docs/compatibility.md`
//! written from the results.
//!
//! - [`run`]: prerequisites, the provider snapshot, running
//!   `mariadb-test-run.pl` with progress, `OUT/<provider>/run.json`;
//! - [`parse`]: reading MTR's raw log (port of `scripts/mtr-summary.py`);
//! - [`report`]: the markdown;
//! - [`list`]: `--list FILE` and test names; [`host`]: machine facts;
//!   [`progress`]: the progress line.
//!
//! Everything a run produces stays in `--out DIR` (default a fresh
//! `$TMPDIR/tandem-mtr.XXXXXX`): `run.json`, and per provider `mtr.log` (the
//! raw MTR output), `summary.tsv`, `report.xml`, `var/` (MTR's vardir, server
//! logs in `var/log/`), `provider/` (the library copy the servers loaded).

pub mod host;
pub mod list;
pub mod parse;
pub mod progress;
pub mod report;
pub mod run;
pub mod run_as;

use anyhow::{anyhow, bail, Context, Result};
use parse::{Outcome, Parsed};
use progress::Progress;
use report::{ProviderResults, ReportInput, NOTES_PATH};
use run::{RunRecord, RunSpec};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tandem::cluster::prereq::{resolve_provider, workspace_root};
use tandem::cluster::ProviderKind;
use tandem::time_fmt;

/// The doc's place in the workspace.
pub const DOC_PATH: &str = "docs/compatibility.md";
/// Default suites.
pub const SUITES: [&str; 3] = ["galera", "galera_3nodes", "galera_sr"];
/// Whole suites: the run waits far more than it computes (SST, restarts,
/// sleeps, polling): with 2 workers the load average stayed below 1 on the
/// 2-core machine and both suites took 49 min (Galera) + 73 min (Tandem);
/// a 39-test sample ran 1.7 times faster with 4 workers, with the same results.
pub const SUITE_PARALLEL: usize = 4;
/// Explicit tests: one worker, so per-test wall times mean something.
pub const LIST_PARALLEL: usize = 1;
/// Minutes before MTR kills a test. A test that Tandem makes hang costs this
/// much; Galera's slowest non-big tests take about 2 minutes here.
pub const TESTCASE_TIMEOUT_MIN: u32 = 5;
const META_FILE: &str = "run.json";

/// The providers `tandem-lab mtr` compares (a standalone server has no galera suite).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    Galera,
    Tandem,
}

impl Provider {
    /// For `cluster::prereq::resolve_provider`.
    pub fn kind(self) -> ProviderKind {
        match self {
            Provider::Galera => ProviderKind::Galera,
            Provider::Tandem => ProviderKind::Tandem,
        }
    }

    /// "Galera", "Tandem": for the report.
    pub fn title(self) -> &'static str {
        match self {
            Provider::Galera => "Galera",
            Provider::Tandem => "Tandem",
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Provider::Galera => "galera",
            Provider::Tandem => "tandem",
        })
    }
}

/// Run MariaDB's galera MTR suites against Galera and Tandem and write the
/// compatibility report (see the examples in `--help`).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  tandem-lab mtr        the three suites, Galera then Tandem; writes docs/compatibility.md (hours)
  tandem-lab mtr --providers tandem --list tests/mtr/ci.txt --no-doc --expect-pass
  tandem-lab mtr --providers tandem galera.basic galera.fk -- --mysqld=--wsrep_debug=1
  tandem-lab mtr --reparse /tmp/tandem-mtr.AbC123     re-render the doc from a kept run

Environment: MTR_DIR (default /usr/share/mysql/mysql-test), TANDEM_PROVIDER.")]
pub struct MtrArgs {
    /// Providers to run, in this order
    #[arg(long, value_delimiter = ',', default_values_t = [Provider::Galera, Provider::Tandem])]
    providers: Vec<Provider>,
    /// MTR suites to run whole (when no test is named); the first one is
    /// also the suite of bare test names
    #[arg(long, value_delimiter = ',', default_values_t = SUITES.map(String::from))]
    suites: Vec<String>,
    /// Run the tests listed in FILE instead (first word per line; a word
    /// starting with '#' starts a comment, e.g. tests/mtr/ci.txt)
    #[arg(long, value_name = "FILE", conflicts_with = "tests")]
    list: Option<PathBuf>,
    /// Tests to run instead of whole suites: suite.name, or a bare name in
    /// the first of --suites
    #[arg(value_name = "TEST")]
    tests: Vec<String>,
    /// Galera library [default: /usr/lib/galera/libgalera_smm.so]
    #[arg(long, value_name = "PATH")]
    galera_path: Option<PathBuf>,
    /// Tandem library [default: $TANDEM_PROVIDER, else <workspace>/target/release/libtandem.so]
    #[arg(long, value_name = "PATH")]
    tandem_path: Option<PathBuf>,
    /// MTR workers [default: 4 for whole suites, 1 for named tests]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=16))]
    parallel: Option<u16>,
    /// Minutes before MTR gives up on one test
    #[arg(long, value_name = "MIN", default_value_t = TESTCASE_TIMEOUT_MIN,
          value_parser = clap::value_parser!(u32).range(1..))]
    testcase_timeout: u32,
    /// Keep the raw logs here [default: a new $TMPDIR/tandem-mtr.XXXXXX]
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Write the report here [default: <workspace>/docs/compatibility.md]
    #[arg(long, value_name = "PATH", conflicts_with = "no_doc")]
    doc: Option<PathBuf>,
    /// Do not write the report
    #[arg(long)]
    no_doc: bool,
    /// Exit non-zero unless every test of every run passed or was skipped
    /// (a failure, a test MTR never ran, or a warning at shutdown fails)
    #[arg(long)]
    expect_pass: bool,
    /// Run nothing: re-read the raw logs an earlier run kept in DIR (its
    /// --out) and write the report again (e.g. after editing tests/mtr/notes.md)
    #[arg(long, value_name = "DIR", conflicts_with_all = ["list", "tests", "out"])]
    reparse: Option<PathBuf>,
    /// Run MTR and its servers as this ordinary user (as MariaDB's CI does;
    /// tests that exec `mariadbd --wsrep-recover` themselves fail as root).
    /// MTR's directories in --out become the user's
    #[arg(long, value_name = "USER")]
    run_as: Option<String>,
    /// Extra arguments for mariadb-test-run.pl (after `--`)
    #[arg(last = true, value_name = "EXTRA MTR ARGS")]
    extra: Vec<String>,
}

/// The whole command, kept as `OUT/run.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct RunMeta {
    command: String,
    started: u64,
    finished: u64,
    machine: host::Machine,
    providers: Vec<Provider>,
}

pub fn run(args: MtrArgs) -> Result<()> {
    if let Some(dir) = args.reparse.clone() {
        return reparse(&args, &dir);
    }
    let mut progress = Progress::new();
    let env = run::check_environment()?;
    let tests = match &args.list {
        Some(path) => list::read_list(path)?,
        None => args.tests.clone(),
    };
    let default_suite = args.suites.first().map_or("galera", String::as_str);
    let tests = list::qualify(&tests, default_suite);
    if tests.is_empty() {
        for suite in &args.suites {
            env.check_suite(suite)?;
        }
    } else {
        for test in &tests {
            env.check_test(test)?;
        }
    }
    if args.providers.is_empty() {
        bail!("--providers names no provider");
    }
    let mut libraries = Vec::new();
    for &kind in &args.providers {
        let explicit = match kind {
            Provider::Galera => args.galera_path.as_deref(),
            Provider::Tandem => args.tandem_path.as_deref(),
        };
        // prereq's messages name `tandem cluster`'s option; ours differ.
        let flag = format!("--{kind}-path");
        let library = resolve_provider(kind.kind(), explicit)
            .map_err(|e| anyhow!("{}", e.to_string().replace("--provider-path", &flag)))?;
        env.check_provider(kind, &library)?;
        libraries.push((kind, library));
    }
    let run_as = args.run_as.as_deref().map(run_as::RunAs::lookup).transpose()?;
    let doc = doc_path(&args)?;
    let out = match &args.out {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            std::path::absolute(dir)?
        }
        None => fresh_temp_dir()?,
    };
    let parallel = args.parallel.map_or(if tests.is_empty() { SUITE_PARALLEL } else { LIST_PARALLEL }, usize::from);

    let mut meta = RunMeta {
        command: quote_command(std::env::args()),
        started: host::now_unix(),
        finished: 0,
        machine: host::Machine::probe(),
        providers: args.providers.clone(),
    };
    progress.say(&format!("raw logs go to {}", out.display()));
    let mut results = Vec::new();
    for (kind, library) in libraries {
        let spec = RunSpec {
            provider: kind,
            library,
            dir: out.join(kind.to_string()),
            parallel,
            testcase_timeout_min: args.testcase_timeout,
            suites: args.suites.clone(),
            tests: tests.clone(),
            extra: args.extra.clone(),
            run_as: run_as.clone(),
        };
        let record = run::run_provider(&env, &spec, &mut progress)?;
        let parsed = parse_run(&spec.dir, &record)?;
        progress.say(&format!(
            "{kind}: done in {}: {}; MTR exit status {}",
            time_fmt::duration(record.elapsed_s),
            run::summary_line(&parsed),
            record.exit_text()
        ));
        results.push(ProviderResults { record, parsed });
        // After each provider, so that `--reparse` works on an interrupted run.
        meta.finished = host::now_unix();
        meta.save(&out)?;
    }

    if let Some(doc) = &doc {
        write_doc(doc, &meta, &results, &out)?;
        progress.say(&format!("wrote {}", doc.display()));
    }
    progress
        .say(&format!("raw logs: {} (<provider>/mtr.log, <provider>/summary.tsv, <provider>/var/log/)", out.display()));
    if args.expect_pass {
        verdict(&results, &out)?;
    }
    Ok(())
}

impl RunMeta {
    fn save(&self, out: &Path) -> Result<()> {
        let path = out.join(META_FILE);
        std::fs::write(&path, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))
    }
}

/// `--reparse DIR`: the report (and verdict) again from kept logs.
fn reparse(args: &MtrArgs, dir: &Path) -> Result<()> {
    let meta_path = dir.join(META_FILE);
    let text = std::fs::read_to_string(&meta_path).with_context(|| {
        format!("cannot read {} (is {} the --out of a tandem-lab mtr run?)", meta_path.display(), dir.display())
    })?;
    let meta: RunMeta = serde_json::from_str(&text).with_context(|| format!("cannot parse {}", meta_path.display()))?;
    let mut results = Vec::new();
    for &kind in &meta.providers {
        let pdir = dir.join(kind.to_string());
        if !pdir.join(run::RECORD_FILE).is_file() {
            continue;
        }
        let record = RunRecord::load(&pdir)?;
        let parsed = parse_run(&pdir, &record)?;
        eprintln!("tandem-lab mtr: {kind}: {}", run::summary_line(&parsed));
        results.push(ProviderResults { record, parsed });
    }
    if results.is_empty() {
        bail!("{} holds no finished provider run", dir.display());
    }
    if let Some(doc) = doc_path(args)? {
        write_doc(&doc, &meta, &results, &std::path::absolute(dir)?)?;
        eprintln!("tandem-lab mtr: wrote {}", doc.display());
    }
    if args.expect_pass {
        verdict(&results, dir)?;
    }
    Ok(())
}

/// Parses `DIR/mtr.log`, adds the expected tests MTR never reported, and
/// writes `DIR/summary.tsv`.
fn parse_run(dir: &Path, record: &RunRecord) -> Result<Parsed> {
    let log = dir.join(run::LOG_FILE);
    let bytes = std::fs::read(&log).with_context(|| format!("cannot read {}", log.display()))?;
    let mut parsed = parse::parse_log(&String::from_utf8_lossy(&bytes));
    parsed.add_not_run(&record.expected);
    let mut tsv = String::from("test\tresult\tmtr_ms\twall_s\treason\n");
    for t in &parsed.tests {
        tsv += &format!(
            "{}\t{}\t{}\t{}\t{}\n",
            t.name,
            t.outcome,
            t.mtr_ms.map_or("-".to_string(), |ms| ms.to_string()),
            t.wall_s.map_or("-".to_string(), |s| format!("{s:.1}")),
            t.reason.replace('\t', " ")
        );
    }
    let path = dir.join("summary.tsv");
    std::fs::write(&path, tsv).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(parsed)
}

/// `--doc`, else the workspace's docs/compatibility.md; None with `--no-doc`.
fn doc_path(args: &MtrArgs) -> Result<Option<PathBuf>> {
    if args.no_doc {
        return Ok(None);
    }
    let path = match &args.doc {
        Some(path) => std::path::absolute(path)?,
        None => match workspace_root() {
            Some(root) => root.join(DOC_PATH),
            None => bail!(
                "cannot find the tandem workspace to write {DOC_PATH} in: run from it, \
                 or pass --doc PATH or --no-doc"
            ),
        },
    };
    match path.parent() {
        Some(parent) if parent.is_dir() => Ok(Some(path)),
        _ => bail!("cannot write {}: no such directory", path.display()),
    }
}

fn write_doc(doc: &Path, meta: &RunMeta, results: &[ProviderResults], out: &Path) -> Result<()> {
    let notes_path = workspace_root().map(|root| root.join(NOTES_PATH));
    let notes = notes_path.as_ref().and_then(|p| std::fs::read_to_string(p).ok());
    if notes.is_none() {
        eprintln!("tandem-lab mtr: warning: {NOTES_PATH} not found; the report has no analysis section");
    }
    let text = report::render(&ReportInput {
        runs: results,
        machine: &meta.machine,
        command: &meta.command,
        started: meta.started,
        finished: meta.finished,
        out_dir: &out.display().to_string(),
        notes: notes.as_deref(),
    });
    std::fs::write(doc, text).with_context(|| format!("cannot write {}", doc.display()))
}

/// `--expect-pass`: every run must have passed something, and nothing may
/// have failed, been left unrun, or warned at shutdown.
fn verdict(results: &[ProviderResults], out: &Path) -> Result<()> {
    let mut problems = Vec::new();
    for r in results {
        let kind = r.record.provider;
        let bad: Vec<String> = r
            .parsed
            .tests
            .iter()
            .filter(|t| t.outcome.is_bad())
            .map(|t| format!("  {} {}: {}", t.name, t.outcome, t.reason))
            .collect();
        let log = out.join(kind.to_string()).join(run::LOG_FILE);
        if !bad.is_empty() {
            problems.push(format!(
                "{kind}: {} test(s) did not pass (log {}):\n{}",
                bad.len(),
                log.display(),
                bad.join("\n")
            ));
        } else if r.parsed.count(Outcome::Pass) == 0 {
            problems.push(format!("{kind}: no test passed ({} reported; log {})", r.parsed.tests.len(), log.display()));
        } else if r.record.exit_code != Some(0) {
            let why = if r.parsed.fatal.is_empty() {
                "no test is to blame; see the end of the log".to_string()
            } else {
                r.parsed.fatal.join("; ")
            };
            problems.push(format!("{kind}: MTR exit status {}: {why} (log {})", r.record.exit_text(), log.display()));
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    bail!("--expect-pass: {}", problems.join("\n"))
}

/// A new `$TMPDIR/tandem-mtr.XXXXXX` (create_dir fails if it exists, so two
/// runs never share one).
fn fresh_temp_dir() -> Result<PathBuf> {
    let base = std::env::temp_dir();
    let seed = host::now_unix() ^ u64::from(std::process::id()) << 20;
    for attempt in 0..1000u64 {
        let mut n = seed.wrapping_add(attempt.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let suffix: String = (0..6)
            .map(|_| {
                let c = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"[(n % 62) as usize];
                n /= 62;
                c as char
            })
            .collect();
        let dir = base.join(format!("tandem-mtr.{suffix}"));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
        }
    }
    bail!("cannot create a temporary directory under {}", base.display())
}

/// Words joined for a shell: quoted only where needed.
pub fn quote_command<I, S>(words: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    words
        .into_iter()
        .map(|w| {
            let w = w.as_ref();
            let plain = !w.is_empty()
                && !w.starts_with('#')
                && w.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+#".contains(c));
            if plain {
                w.to_string()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests;
