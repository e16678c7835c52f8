//! The log parser on captured MTR output (`testdata/`, trimmed excerpts of
//! real runs on the 2-core Debian 12 machine; see testdata/README.md).

use super::parse::{parse_log, Outcome, Parsed, TestResult};

fn get<'a>(parsed: &'a Parsed, name: &str) -> &'a TestResult {
    parsed.get(name).unwrap_or_else(|| panic!("{name} not parsed; got {:#?}", parsed.tests))
}

fn wall(t: &TestResult) -> f64 {
    let w = t.wall_s.unwrap_or_else(|| panic!("{} has no wall time", t.name));
    (w * 1000.0).round() / 1000.0
}

/// Tandem, --parallel 1, a build that logged a `[Warning]` at every cluster
/// shutdown: passes become `warn`, named by MTR's shutdown report.
#[test]
fn serial_run_with_shutdown_warnings() {
    let parsed = parse_log(include_str!("testdata/serial_shutdown_warnings.log"));
    assert_eq!(parsed.tests.len(), 25);
    assert_eq!(parsed.count(Outcome::Warn), 16);
    assert_eq!(parsed.count(Outcome::Fail), 1);
    assert_eq!(parsed.count(Outcome::Pass), 8);
    assert!(parsed.fatal.is_empty(), "{:?}", parsed.fatal);

    // First result: its wall time includes the worker's start-up stamp?
    // No: worker[NN] lines run on their own clock and are not added.
    let first = get(&parsed, "galera.MDEV-27123");
    assert_eq!(first.outcome, Outcome::Warn);
    assert_eq!(first.mtr_ms, Some(2204));
    assert_eq!(wall(first), 16.966);
    assert_eq!(
        first.reason,
        "shutdown log-warning: [Warning] WSREP: Member 4795175317853487717 is the last voter: leaving ends the group"
    );

    // A shutdown report naming a whole server session (38 tests, most of
    // them outside this excerpt: those names are ignored).
    let t = get(&parsed, "galera.mysql-wsrep#247");
    assert_eq!(t.outcome, Outcome::Warn);
    assert!(t.reason.contains("11865812852762201752"), "{}", t.reason);

    // MTR names the test without its combination; the combination that ran
    // last on that server is the one flagged.
    let aria = get(&parsed, "galera.galera_aria 'binlogon'");
    assert_eq!(aria.outcome, Outcome::Warn);
    assert!(aria.reason.contains("9843905361594028892"), "{}", aria.reason);
    assert_eq!(aria.base_name(), "galera.galera_aria");

    // A failed test keeps its own reason; the shutdown warning is appended.
    let sr = get(&parsed, "galera.MDEV-24143");
    assert_eq!(sr.outcome, Outcome::Fail);
    assert_eq!(sr.mtr_ms, None);
    assert_eq!(wall(sr), 15.578);
    assert!(
        sr.reason.starts_with(
            "mysqltest: At line 9: query 'SET SESSION wsrep_trx_fragment_size=10' failed: ER_WRONG_VALUE_FOR_VAR (1231)"
        ),
        "{}",
        sr.reason
    );
    assert!(
        sr.reason
            .ends_with(" | shutdown log-warning: [Warning] WSREP: Member 5163775222649450878 is the last voter: leaving ends the group"),
        "{}",
        sr.reason
    );

    // Clean passes after the build stopped warning; '#' in a name.
    let t = get(&parsed, "galera.galera#505");
    assert_eq!(t.outcome, Outcome::Pass);
    assert_eq!(t.mtr_ms, Some(2140));
    assert_eq!(wall(t), 2.714);
    assert_eq!(t.reason, "");
}

/// Tandem, --parallel 1: a test that dies, result mismatches, a refused
/// variable, and one failed test's warnings reported at shutdown for every
/// other test of its server session ("collateral" warns).
#[test]
fn serial_run_with_failures() {
    let parsed = parse_log(include_str!("testdata/serial_failures.log"));
    assert_eq!(parsed.count(Outcome::Fail), 3);

    let t = get(&parsed, "galera.galera_suspend_slave");
    assert_eq!(t.outcome, Outcome::Fail);
    assert_eq!(wall(t), 83.623);
    assert_eq!(
        t.reason,
        "mysqltest: At line 29: Explicit --die command executed (in ./include/wait_until_ready.inc): \
         Node still not ready after a minute, giving up! | shutdown log-warning: \
         [Warning] WSREP: server: vm unallowed state transition: disconnected -> joined"
    );

    // Collateral: passed, but in the session whose shutdown logged warnings.
    for name in
        ["galera.galera_lock_table", "galera.galera_sp_insert_parallel", "galera.galera_myisam_autocommit 'binlogoff'"]
    {
        let t = get(&parsed, name);
        assert_eq!(t.outcome, Outcome::Warn, "{name}");
        assert_eq!(
            t.reason,
            "shutdown log-warning: [Warning] WSREP: server: vm unallowed state transition: disconnected -> joined"
        );
    }
    // The next session is clean.
    let t = get(&parsed, "galera.galera_toi_alter_auto_increment");
    assert_eq!((t.outcome, t.mtr_ms), (Outcome::Pass, Some(4271)));
    assert_eq!(wall(t), 16.719);

    // "Result content mismatch" plus the first changed lines of the diff.
    let t = get(&parsed, "galera.MDEV-37366");
    assert_eq!(t.outcome, Outcome::Fail);
    assert_eq!(t.reason, "Result content mismatch: -AUTO_INCREMENT_OFFSET 1 1 / +AUTO_INCREMENT_OFFSET 2 2");

    let t = get(&parsed, "galera.galera_var_trx_fragment_size");
    assert!(
        t.reason.starts_with(
            "mysqltest: At line 15: query 'SET GLOBAL wsrep_trx_fragment_size=-1' failed: ER_WRONG_VALUE_FOR_VAR (1231)"
        ),
        "{}",
        t.reason
    );
    // The failure block ends at the next result line.
    let t = get(&parsed, "galera.galera_load_data");
    assert_eq!((t.outcome, t.mtr_ms), (Outcome::Pass, Some(22231)));
    assert_eq!(wall(t), 36.43);
}

/// Galera, without the SST options: rsync SST fails as root, node 2 never
/// starts. No --timestamp here, so no wall times.
#[test]
fn failed_server_start() {
    let parsed = parse_log(include_str!("testdata/rsync_sst_failure.log"));
    assert_eq!(parsed.tests.len(), 1);
    let t = &parsed.tests[0];
    assert_eq!(t.name, "galera.basic");
    assert_eq!(t.outcome, Outcome::Fail);
    assert_eq!(t.wall_s, None);
    assert_eq!(
        t.reason,
        "Failed to start mysqld.2 | shutdown log-warning: WSREP_SST: [ERROR] find/rsync returned code 123: (20261122 00:01:07.021)"
    );
    assert!(parsed.fatal.is_empty(), "{:?}", parsed.fatal);
}

#[test]
fn not_run_tests_are_added() {
    let mut parsed = parse_log(include_str!("testdata/serial_shutdown_warnings.log"));
    parsed.add_not_run(&[
        "galera.basic".to_string(),       // not in this excerpt
        "galera.galera_aria".to_string(), // reported as a combination
        "galera.galera#505".to_string(),
    ]);
    assert_eq!(parsed.tests.len(), 26);
    let t = get(&parsed, "galera.basic");
    assert_eq!(t.outcome, Outcome::NotRun);
    assert_eq!(t.reason, "not reported by MTR (aborted run or unknown test)");
    assert!(parsed.get("galera.galera_aria").is_none());
}

/// Tandem, --parallel 2 (captured with `tandem mtr --parallel 2`): worker
/// prefixes, `wN` columns, combinations, a disabled test, a skip with MTR's
/// reason, a failure. Wall times come from the main process's stamps only.
#[test]
fn parallel_run() {
    let parsed = parse_log(include_str!("testdata/parallel_tandem.log"));
    let rows: Vec<(&str, Outcome, Option<u64>, f64)> =
        parsed.tests.iter().map(|t| (t.name.as_str(), t.outcome, t.mtr_ms, wall(t))).collect();
    assert_eq!(
        rows,
        [
            ("galera.galera_var_notify_cmd", Outcome::Disabled, None, 3.367),
            ("galera.basic", Outcome::Pass, Some(2690), 19.649),
            ("galera.fk", Outcome::Pass, Some(3154), 0.807),
            ("galera.galera_aria 'binlogon'", Outcome::Pass, Some(2250), 18.226),
            ("galera.MDEV-35748", Outcome::Skipped, None, 0.47),
            ("galera.galera_var_trx_fragment_size", Outcome::Fail, None, 18.032),
            ("galera.galera_aria 'binlogoff'", Outcome::Pass, Some(2319), 0.166),
        ]
    );
    assert_eq!(
        get(&parsed, "galera.galera_var_notify_cmd").reason,
        "MDEV-37257 WSREP: Notification command failed: 1 (Operation not permitted)"
    );
    assert_eq!(get(&parsed, "galera.MDEV-35748").reason, "Test requires MyRocks engine");
    assert_eq!(
        get(&parsed, "galera.galera_var_trx_fragment_size").reason,
        "mysqltest: At line 15: query 'SET GLOBAL wsrep_trx_fragment_size=-1' failed: \
         ER_WRONG_VALUE_FOR_VAR (1231): Variable 'wsrep_trx_fragment_size' can't be set to the value of '-1'"
    );
    // "there were failing test cases" is the normal end of a failed run.
    assert!(parsed.fatal.is_empty(), "{:?}", parsed.fatal);
    assert_eq!(get(&parsed, "galera.basic").suite(), "galera");
}

/// The progress display recognises the same lines as the parser.
#[test]
fn progress_sees_every_result_line() {
    let text = include_str!("testdata/parallel_tandem.log");
    let streamed: Vec<String> = text.lines().filter_map(super::parse::result_line).map(|r| r.test).collect();
    let parsed: Vec<String> = parse_log(text).tests.into_iter().map(|t| t.name).collect();
    assert_eq!(streamed, parsed);
}

/// MTR gave up before running anything: its error is kept, and every
/// expected test becomes not-run.
#[test]
fn aborted_run() {
    let mut parsed = parse_log(include_str!("testdata/unknown_test.log"));
    assert!(parsed.tests.is_empty());
    assert_eq!(parsed.fatal, ["mysql-test-run: *** ERROR: Could not find 'nosuch_test' in 'galera' suite"]);
    parsed.add_not_run(&["galera.nosuch_test".to_string()]);
    assert_eq!(parsed.count(Outcome::NotRun), 1);
}
