//! Reading a raw mariadb-test-run (MTR) log: one result per test.
//!
//! Ported from `scripts/mtr-summary.py`. The log is MTR's stdout and stderr
//! together, run with `--timestamp --timediff` so that every line the main
//! process prints starts with `YYMMDD HH:MM:SS +SECONDS`, the seconds since
//! its previous stamped line. Result lines look like
//!
//! ```text
//! 261122  2:30:34 +15.831 galera.basic                             [ pass ]   2269
//! 261122  2:48:50 +0.918 galera.galera_partitioned_tables 'binlogon' w2 [ pass ]   2758
//! 261122  2:48:00 +0.000 galera.GAL-419                           [ skipped ]  Test needs --big-test
//! ```
//!
//! (`w2`: the worker that ran it with `--parallel` > 1; `'binlogon'`: the
//! combination). A `[ fail ]` line is followed by a block explaining the
//! failure, up to the next `-----` line or result line. Lines prefixed
//! `worker[NN]` come from a forked worker with its own `--timediff` clock, so
//! only the main process's stamps add up to wall time.
//!
//! MTR checks the server error logs for unsuppressed `[Warning]`/`[ERROR]`
//! lines again when it shuts servers down, and then prints
//! `***Warnings generated in error logs during shutdown after running tests: T1 T2 ...`:
//! the run fails although each test passed. Those tests become [`Outcome::Warn`].

use regex::Regex;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::OnceLock;

/// Reasons are cut to this many characters (they end up in a table cell).
pub const REASON_CHARS: usize = 200;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    Pass,
    /// MTR said `[ pass ]`, but a server the test ran on logged an
    /// unsuppressed warning that MTR only found at shutdown.
    Warn,
    Fail,
    Skipped,
    Disabled,
    /// Asked for, but MTR never reported it (aborted run, unknown test).
    NotRun,
}

impl Outcome {
    pub const ALL: [Outcome; 6] =
        [Outcome::Pass, Outcome::Fail, Outcome::Warn, Outcome::Skipped, Outcome::Disabled, Outcome::NotRun];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Warn => "warn",
            Outcome::Fail => "fail",
            Outcome::Skipped => "skipped",
            Outcome::Disabled => "disabled",
            Outcome::NotRun => "not-run",
        }
    }

    /// What `--expect-pass` refuses.
    pub fn is_bad(self) -> bool {
        matches!(self, Outcome::Fail | Outcome::Warn | Outcome::NotRun)
    }

    fn from_mtr(word: &str) -> Option<Outcome> {
        // "retry-fail", "exp-fail", "retry-pass": the outcome is the last part.
        match word.rsplit('-').next()? {
            "pass" => Some(Outcome::Pass),
            "fail" => Some(Outcome::Fail),
            "skipped" => Some(Outcome::Skipped),
            "disabled" => Some(Outcome::Disabled),
            _ => None,
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One test (one combination of it) as the log tells it.
#[derive(Clone, Debug, PartialEq)]
pub struct TestResult {
    /// `suite.name`, plus ` 'combination'` when the test has combinations.
    pub name: String,
    pub outcome: Outcome,
    /// MTR's own time for a pass (test body only, no server restarts).
    pub mtr_ms: Option<u64>,
    /// Seconds of the main process's clock since the previous result line:
    /// the test's wall time including restarts with `--parallel 1`, its share
    /// of the run's elapsed time with more workers.
    pub wall_s: Option<f64>,
    /// Skip/disable comment, failure reason, or the shutdown warning.
    pub reason: String,
}

impl TestResult {
    /// `galera.galera_aria 'binlogon'` -> `galera.galera_aria`.
    pub fn base_name(&self) -> &str {
        base_name(&self.name)
    }

    pub fn suite(&self) -> &str {
        self.name.split('.').next().unwrap_or("")
    }
}

pub fn base_name(name: &str) -> &str {
    name.split_whitespace().next().unwrap_or(name)
}

/// Everything read from one log.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parsed {
    /// In the order MTR first reported them.
    pub tests: Vec<TestResult>,
    /// `mysql-test-run: *** ERROR: ...` lines other than the usual
    /// "there were failing test cases": MTR gave up on something.
    pub fatal: Vec<String>,
}

impl Parsed {
    pub fn get(&self, name: &str) -> Option<&TestResult> {
        self.tests.iter().find(|t| t.name == name)
    }

    /// Adds a `not-run` result for each expected test MTR never reported.
    /// An expected name without a combination is satisfied by any of its
    /// combinations.
    pub fn add_not_run(&mut self, expected: &[String]) {
        for want in expected {
            let reported = self.tests.iter().any(|t| t.name == *want || t.base_name() == want);
            if !reported {
                self.tests.push(TestResult {
                    name: want.clone(),
                    outcome: Outcome::NotRun,
                    mtr_ms: None,
                    wall_s: None,
                    reason: "not reported by MTR (aborted run or unknown test)".into(),
                });
            }
        }
    }

    pub fn count(&self, outcome: Outcome) -> usize {
        self.tests.iter().filter(|t| t.outcome == outcome).count()
    }

    /// Sum of the per-test wall times (the run's elapsed time, less its start-up).
    pub fn wall_s(&self) -> f64 {
        self.tests.iter().filter_map(|t| t.wall_s).sum()
    }
}

/// A result line as it streams by (for progress display).
#[derive(Clone, Debug, PartialEq)]
pub struct ResultLine {
    pub test: String,
    pub outcome: Outcome,
    /// `+SECONDS` of the line's `--timediff` stamp.
    pub diff_s: Option<f64>,
    /// Text after `[ result ]`: ms for a pass, the comment for a skip.
    pub rest: String,
    /// `[ retry-... ]`: MTR runs the test again (`--retry`), and the later
    /// line decides.
    pub retry: bool,
}

struct Patterns {
    result: Regex,
    stamp: Regex,
    shutdown_warn: Regex,
    fatal: Regex,
    check_fail: Regex,
    logline: Regex,
    reasons: Vec<Regex>,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| {
        let re = |s: &str| Regex::new(s).expect("static regex");
        let ts = r"(?:\d{6}\s+\d{1,2}:\d{2}:\d{2}(?:\s+\+(?P<diff>[\d.]+))?\s+)?";
        Patterns {
            result: re(&format!(
                r"^(?:worker\[\d+\]\s+)?{ts}(?P<test>[A-Za-z0-9_#.\-]+\.[^\s]+(?:\s+'[^']*')?)\s+(?:w\d+\s+)?\[ (?P<res>(?:retry-)?(?:exp-)?(?:pass|fail|skipped|disabled)) \]\s*(?P<rest>.*)$"
            )),
            stamp: re(r"^\d{6}\s+\d{1,2}:\d{2}:\d{2}\s+\+(?P<diff>[\d.]+)\s"),
            shutdown_warn: re(
                r"\*\*\*Warnings generated in error logs during shutdown after running tests: (.*)",
            ),
            fatal: re(r"mysql-test-run: \*\*\* ERROR: .*"),
            check_fail: re(r"MTR's internal check of the test case '([^']+)' failed"),
            logline: re(r"\[(?:ERROR|Warning)\].*|^(?:WSREP_SST: )?\[ERROR\].*"),
            reasons: [
                r"timeout after \d+ seconds",
                r"Failed to start mysqld\.\d+",
                r"Server \[mysqld\.\d+.*\] failed during test run",
                r"mysqltest: At line \d+: .*",
                r"mysqltest: Result (?:content mismatch|length mismatch).*",
                r"Result (?:content|length) mismatch",
                r"query '.*' failed: .*",
                r"Could not execute 'check-testcase'.*",
                r"mysqltest failed but provided no output",
            ]
            .iter()
            .map(|s| re(s))
            .collect(),
        }
    })
}

/// Recognises one result line.
pub fn result_line(line: &str) -> Option<ResultLine> {
    let caps = patterns().result.captures(line)?;
    let word = &caps["res"];
    Some(ResultLine {
        test: caps["test"].trim().to_string(),
        outcome: Outcome::from_mtr(word)?,
        diff_s: caps.name("diff").and_then(|d| d.as_str().parse().ok()),
        rest: caps["rest"].trim().to_string(),
        retry: word.starts_with("retry-"),
    })
}

fn cut(text: &str) -> String {
    text.trim().chars().take(REASON_CHARS).collect()
}

/// The reason for a failure from the text MTR printed under `[ fail ]`
/// (`head` is what followed `[ fail ]` on the result line itself).
fn reason_from_block(head: &str, block: &[String]) -> String {
    let p = patterns();
    if head.starts_with("Found warnings/errors") {
        return block
            .iter()
            .find_map(|line| p.logline.find(line))
            .map(|m| format!("log-warning: {}", cut(m.as_str())))
            .unwrap_or_else(|| "warnings/errors in server log".into());
    }
    // Not in the Python original: a result diff ("--- r/x.result",
    // "+++ r/x.reject", "@@ ...") says more through its first changed lines
    // than "Result length mismatch" (or than the "--- ..." line itself).
    let diff = diff_reason(block);
    let block = &join_included_file(block);
    for pat in &p.reasons {
        let found = std::iter::once(head).chain(block.iter().map(String::as_str)).find_map(|line| pat.find(line));
        if let Some(m) = found {
            let found = &shorten_exec(m.as_str().trim());
            return match &diff {
                Some(diff) if found.contains("mismatch") => cut(&format!("{found}: {diff}")),
                _ if found.contains("Explicit --die command executed") => match die_message(block) {
                    Some(msg) => cut(&format!("{found}: {msg}")),
                    None => cut(found),
                },
                _ => cut(found),
            };
        }
    }
    if let Some(diff) = diff {
        return cut(&format!("result mismatch: {diff}"));
    }
    for line in block {
        let t = line.trim();
        if !t.is_empty() && !t.starts_with("Test ended") && !t.starts_with("CURRENT_TEST") && !t.starts_with("- saving")
        {
            return cut(t);
        }
    }
    if head.trim().is_empty() {
        "unknown".into()
    } else {
        cut(head)
    }
}

/// Not in the Python original. mysqltest reports an error inside an included
/// file on three lines:
///
/// ```text
/// mysqltest: In included file "./include/wait_until_ready.inc":
/// included from /usr/share/mysql/mysql-test/suite/galera/t/galera_suspend_slave.test at line 62:
/// At line 29: Explicit --die command executed
/// ```
///
/// which become one `mysqltest: At line 29: ... (in ./include/wait_until_ready.inc)`.
fn join_included_file(block: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(block.len());
    let mut file: Option<String> = None;
    for line in block {
        if let Some(rest) = line.strip_prefix("mysqltest: In included file ") {
            file = Some(rest.trim().trim_end_matches(':').trim_matches('"').to_string());
            continue;
        }
        match (&file, line.strip_prefix("At line ")) {
            (Some(f), Some(rest)) => {
                out.push(format!("mysqltest: At line {rest} (in {f})"));
                file = None;
            }
            (Some(_), None) if line.starts_with("included from ") => {}
            _ => out.push(line.clone()),
        }
    }
    out
}

/// Not in the Python original: `exec of '/usr/sbin/mariadbd --defaults-group-suffix=.2
/// ... 2>&1' failed, error: 256` keeps only the program of the command line,
/// which would otherwise fill the reason.
fn shorten_exec(reason: &str) -> String {
    static EXEC: OnceLock<Regex> = OnceLock::new();
    let re = EXEC.get_or_init(|| Regex::new(r"exec of '(\S+)[^']*'").expect("static regex"));
    re.replace(reason, "exec of '$1 ...'").into_owned()
}

/// What a test printed just before `--die` (its own explanation, e.g. "Node
/// still not ready after a minute, giving up!"): the last line of the query
/// output shown, other than `=====` rulers.
fn die_message(block: &[String]) -> Option<String> {
    let start = block.iter().position(|l| l.starts_with("The result from queries just before the failure was"))?;
    block[start + 1..]
        .iter()
        .take_while(|l| !l.starts_with("More results from queries before failure") && !l.starts_with(" - saving"))
        .map(|l| l.trim())
        .filter(|l| !l.is_empty() && !l.chars().all(|c| c == '='))
        .last()
        .map(str::to_string)
}

/// `-expected / +got`: the first changed lines of a unified diff of the .result file.
fn diff_reason(block: &[String]) -> Option<String> {
    let start = block.iter().position(|l| l.starts_with("--- ") && l.contains(".result"))?;
    if !block.get(start + 1)?.starts_with("+++ ") {
        return None;
    }
    let hunk = &block[start + 2..];
    let first = |sign: char| {
        hunk.iter()
            .filter(|l| !l.starts_with("@@") && !l.starts_with("---") && !l.starts_with("+++"))
            .find(|l| l.starts_with(sign))
            .map(|l| l[1..].split_whitespace().collect::<Vec<_>>().join(" "))
    };
    Some(match (first('-'), first('+')) {
        (Some(old), Some(new)) => format!("-{old} / +{new}"),
        (Some(old), None) => format!("-{old} missing"),
        (None, Some(new)) => format!("+{new} extra"),
        (None, None) => "empty diff".to_string(),
    })
}

/// Parses a whole log.
pub fn parse_log(text: &str) -> Parsed {
    Parser::default().run(text.lines())
}

#[derive(Default)]
struct Parser {
    tests: Vec<TestResult>,
    index: HashMap<String, usize>,
    /// The failed test whose explanation we are reading, and its lines.
    cur: Option<usize>,
    block: Vec<String>,
    /// `--timediff` seconds since the last result line.
    acc: f64,
    /// Test -> first log line of its shutdown warning.
    shutdown_warn: Vec<(String, String)>,
    /// Tests of a shutdown-warning report whose log line has not come yet.
    pending_warn: Option<Vec<String>>,
    /// `suite.name` -> key of its most recent result line.
    latest: HashMap<String, String>,
    /// Tests with a final `[ fail ]` (not `retry-fail`): a later repetition
    /// (`--repeat`) that passes does not make the test a pass.
    failed: HashSet<usize>,
}

impl Parser {
    fn close(&mut self) {
        if let Some(i) = self.cur.take() {
            let block = std::mem::take(&mut self.block);
            let r = &mut self.tests[i];
            if r.outcome == Outcome::Fail {
                r.reason = reason_from_block(&r.reason, &block);
            }
        }
        self.block.clear();
    }

    fn run<'a>(mut self, lines: impl Iterator<Item = &'a str>) -> Parsed {
        let p = patterns();
        let mut fatal = Vec::new();
        for line in lines {
            if let Some(m) = p.fatal.find(line) {
                if !m.as_str().contains("ERROR: there were failing test cases") {
                    fatal.push(m.as_str().trim().to_string());
                }
            }
            if let Some(r) = result_line(line) {
                self.on_result(r);
                continue;
            }
            if let Some(s) = p.stamp.captures(line) {
                self.acc += s["diff"].parse::<f64>().unwrap_or(0.0);
            }
            if let Some(w) = p.shutdown_warn.captures(line) {
                self.close();
                // MTR names a test with combinations without the combination
                // ("galera.galera_aria"): it is the one that ran last, i.e. on
                // the server being shut down.
                let names = w[1]
                    .split_whitespace()
                    .map(|t| self.latest.get(t).cloned().unwrap_or_else(|| t.to_string()))
                    .collect();
                self.pending_warn = Some(names);
                continue;
            }
            if let Some(c) = p.check_fail.captures(line) {
                if let Some(&i) = self.index.get(&c[1]) {
                    let r = &mut self.tests[i];
                    if r.outcome == Outcome::Pass {
                        r.outcome = Outcome::Fail;
                        r.reason = "check-testcase failed (test left state behind)".into();
                    }
                }
            }
            if let Some(pending) = &self.pending_warn {
                if let Some(m) = p.logline.find(line) {
                    for t in pending {
                        if !self.shutdown_warn.iter().any(|(name, _)| name == t) {
                            self.shutdown_warn.push((t.clone(), cut(m.as_str())));
                        }
                    }
                    self.pending_warn = None;
                } else if line.starts_with("-----") {
                    self.pending_warn = None;
                }
            }
            if self.cur.is_some() {
                if line.starts_with("-----") || line.starts_with("The servers were restarted") {
                    self.close();
                } else {
                    self.block.push(line.to_string());
                }
            }
        }
        self.close();
        self.apply_shutdown_warnings();
        Parsed { tests: self.tests, fatal }
    }

    fn on_result(&mut self, r: ResultLine) {
        self.close();
        let wall_s = r.diff_s.map(|diff| {
            let wall = self.acc + diff;
            self.acc = 0.0;
            wall
        });
        let (mtr_ms, reason) = if r.outcome == Outcome::Pass {
            (r.rest.split_whitespace().next().and_then(|w| w.parse().ok()), String::new())
        } else {
            (None, r.rest)
        };
        self.latest.insert(base_name(&r.test).to_string(), r.test.clone());
        let result = TestResult { name: r.test.clone(), outcome: r.outcome, mtr_ms, wall_s, reason };
        let i = match self.index.get(&r.test) {
            Some(&i) if self.failed.contains(&i) => {
                // The failure's explanation was read; this repetition's is not wanted.
                return;
            }
            Some(&i) => {
                self.tests[i] = result;
                i
            }
            None => {
                self.tests.push(result);
                self.index.insert(r.test, self.tests.len() - 1);
                self.tests.len() - 1
            }
        };
        if r.outcome == Outcome::Fail {
            self.cur = Some(i);
            if !r.retry {
                self.failed.insert(i);
            }
        }
    }

    fn apply_shutdown_warnings(&mut self) {
        for (name, warning) in &self.shutdown_warn {
            let Some(&i) = self.index.get(name) else {
                continue;
            };
            let r = &mut self.tests[i];
            match r.outcome {
                Outcome::Pass => {
                    r.outcome = Outcome::Warn;
                    r.reason = format!("shutdown log-warning: {warning}");
                }
                Outcome::Fail if !r.reason.contains("shutdown") => {
                    r.reason = format!("{} | shutdown log-warning: {warning}", r.reason);
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_line_variants() {
        let r =
            result_line("261122  2:30:34 +15.831 galera.basic                             [ pass ]   2269").unwrap();
        assert_eq!(r.test, "galera.basic");
        assert_eq!(r.outcome, Outcome::Pass);
        assert_eq!(r.diff_s, Some(15.831));
        assert_eq!(r.rest, "2269");

        let r = result_line("261122  2:48:50 +0.918 galera.galera_partitioned_tables 'binlogon' w2 [ pass ]   2758")
            .unwrap();
        assert_eq!(r.test, "galera.galera_partitioned_tables 'binlogon'");

        let r = result_line("galera.galera#505 [ retry-fail ]  timeout after 300 seconds").unwrap();
        assert_eq!(r.test, "galera.galera#505");
        assert_eq!(r.outcome, Outcome::Fail);
        assert_eq!(r.diff_s, None);

        assert!(r.retry);
        assert!(!result_line("galera.basic [ fail ]  timeout after 300 seconds").unwrap().retry);

        assert!(result_line("worker[01] Using MTR_BUILD_THREAD 300").is_none());
        assert!(result_line("Completed: All 13 tests were successful.").is_none());
    }

    /// `--repeat=3`: a repetition that failed makes the test a failure,
    /// whatever the repetitions after it did; `--retry`: a retried failure
    /// that then passes is a pass.
    #[test]
    fn a_failed_repetition_stands_and_a_retried_failure_does_not() {
        let log = "galera.a [ pass ]  10\n\
                   galera.a [ fail ]  timeout after 300 seconds\n\
                   Test ended at 2026-11-29\n\
                   galera.a [ pass ]  12\n\
                   galera.b [ retry-fail ]  timeout after 300 seconds\n\
                   galera.b [ pass ]  11\n";
        let parsed = parse_log(log);
        let a = parsed.get("galera.a").unwrap();
        assert_eq!((a.outcome, a.reason.as_str()), (Outcome::Fail, "timeout after 300 seconds"));
        assert_eq!(parsed.get("galera.b").unwrap().outcome, Outcome::Pass);
        assert_eq!(parsed.tests.len(), 2);
    }

    #[test]
    fn exec_failures_name_the_program_only() {
        let block: Vec<String> = [
            "CURRENT_TEST: galera.galera_sst_rsync2",
            "mysqltest: In included file \"./suite/galera/include/galera_wsrep_recover.inc\": ",
            "included from ./suite/galera/include/galera_st_kill_slave.inc at line 60:",
            "included from /usr/share/mysql/mysql-test/suite/galera/t/galera_sst_rsync2.test at line 13:",
            "At line 4: exec of '/usr/sbin/mariadbd --defaults-group-suffix=.2 --innodb --wsrep-recover > /tmp/x.log 2>&1' failed, error: 256, status: 1, errno: 2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            reason_from_block("", &block),
            "mysqltest: At line 4: exec of '/usr/sbin/mariadbd ...' failed, error: 256, status: 1, \
             errno: 2 (in ./suite/galera/include/galera_wsrep_recover.inc)"
        );
    }

    #[test]
    fn diff_reason_names_first_changed_lines() {
        let block: Vec<String> = [
            "CURRENT_TEST: galera.x",
            "--- /a/r/x.result\t2026",
            "+++ /a/r/x.reject\t2026",
            "@@ -6,25 +6,24 @@",
            " same",
            "-mysqld-bin.000002\t#\tGtid",
            "+mysqld-bin.000001\t#\tQuery",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            reason_from_block("", &block),
            "result mismatch: -mysqld-bin.000002 # Gtid / +mysqld-bin.000001 # Query"
        );
    }
}
