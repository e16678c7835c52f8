use super::*;

fn node(state: i64, comment: &str, primary: bool, lag: u64) -> Snapshot {
    Snapshot { state, state_comment: comment.into(), primary, lag, lag_ms: 0 }
}

fn synced(lag: u64) -> Snapshot {
    node(SYNCED, "Synced", true, lag)
}

#[test]
fn a_synced_primary_node_is_available_and_nothing_else_is_by_default() {
    let policy = Policy::default();
    assert_eq!(availability(&synced(0), &policy), Ok("synced".into()));
    for (state, comment) in [(0, "Initialized"), (1, "Joining"), (2, "Donor/Desynced"), (3, "Joined")] {
        assert_eq!(availability(&node(state, comment, true, 0), &policy), Err(comment.into()), "{comment}");
    }
}

#[test]
fn a_node_outside_the_primary_component_is_never_available() {
    let policy = Policy { donor_available: true, lag_drain: 10, lag_drain_seconds: 0 };
    for state in [SYNCED, DONOR] {
        let n = node(state, "x", false, 0);
        assert_eq!(availability(&n, &policy), Err("not in the primary component".into()));
        assert_eq!(agent(&n, &policy), Agent::Down("not in the primary component".into()));
    }
}

#[test]
fn donors_count_only_when_the_operator_says_so() {
    let donor = node(DONOR, "Donor/Desynced", true, 0);
    assert!(availability(&donor, &Policy { donor_available: false, lag_drain: 10, lag_drain_seconds: 0 }).is_err());
    let allowed = availability(&donor, &Policy { donor_available: true, lag_drain: 10, lag_drain_seconds: 0 });
    assert_eq!(allowed, Ok("Donor/Desynced (health.donor_available=YES)".into()));
}

#[test]
fn the_agent_drains_what_still_holds_the_data_and_downs_what_does_not() {
    let policy = Policy::default();
    assert!(matches!(agent(&node(DONOR, "Donor/Desynced", true, 0), &policy), Agent::Drain(_)));
    assert!(matches!(agent(&node(JOINED, "Joined", true, 0), &policy), Agent::Drain(_)));
    assert_eq!(agent(&node(1, "Joining", true, 0), &policy), Agent::Down("Joining".into()));
    assert_eq!(agent(&node(0, "Initialized", true, 0), &policy), Agent::Down("Initialized".into()));
}

#[test]
fn the_weight_falls_with_the_lag_and_the_node_drains_at_the_limit() {
    let policy = Policy { donor_available: false, lag_drain: 100, lag_drain_seconds: 0 };
    assert_eq!(agent(&synced(0), &policy), Agent::Up { weight_percent: 100 });
    assert_eq!(agent(&synced(50), &policy), Agent::Up { weight_percent: 51 });
    assert_eq!(agent(&synced(99), &policy), Agent::Up { weight_percent: 2 });
    assert_eq!(agent(&synced(100), &policy), Agent::Drain("100 write-sets behind (health.lag_drain=100)".into()));
    let mut last = 101;
    for lag in 0..100 {
        let Agent::Up { weight_percent } = agent(&synced(lag), &policy) else { panic!("lag {lag} drained") };
        assert!(weight_percent <= last && weight_percent >= 1, "lag {lag}: {weight_percent}%");
        last = weight_percent;
    }
}

#[test]
fn a_zero_drain_limit_drains_only_a_node_that_lags() {
    let policy = Policy { donor_available: false, lag_drain: 0, lag_drain_seconds: 0 };
    assert_eq!(agent(&synced(0), &policy), Agent::Up { weight_percent: 100 });
    assert!(matches!(agent(&synced(1), &policy), Agent::Drain(_)));
}

#[test]
fn agent_lines_are_one_line_in_haproxys_words() {
    assert_eq!(Agent::Up { weight_percent: 75 }.line(), "up ready 75%\n");
    assert_eq!(Agent::Drain("Donor/Desynced".into()).line(), "up drain #Donor/Desynced\n");
    assert_eq!(Agent::Down("a\nb\rc".into()).line(), "down #a b c\n");
}

#[test]
fn with_a_drain_time_the_weight_falls_with_seconds_behind_too() {
    let policy = Policy { donor_available: false, lag_drain: 1000, lag_drain_seconds: 10 };
    let behind = |lag: u64, lag_ms: u64| agent(&Snapshot { lag_ms, ..synced(lag) }, &policy);
    assert_eq!(behind(0, 0), Agent::Up { weight_percent: 100 });
    // Few write-sets but old ones: the time decides the weight.
    assert_eq!(behind(2, 5_000), Agent::Up { weight_percent: 51 });
    // Many write-sets, none old: the count decides it.
    assert_eq!(behind(500, 100), Agent::Up { weight_percent: 51 });
    assert_eq!(behind(1, 10_000), Agent::Drain("10.0 s behind (health.lag_drain_seconds=10)".into()));
    assert_eq!(behind(1000, 10_000), Agent::Drain("1000 write-sets behind (health.lag_drain=1000)".into()));
}

#[test]
fn without_a_drain_time_seconds_behind_change_nothing() {
    let policy = Policy::default();
    assert_eq!(policy.lag_drain_seconds, 0);
    let old = Snapshot { lag_ms: 3_600_000, ..synced(0) };
    assert_eq!(agent(&old, &policy), Agent::Up { weight_percent: 100 });
}
