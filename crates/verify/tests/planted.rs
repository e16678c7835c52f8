//! Each anomaly planted in a small history is found, named with the
//! transactions that show it, and nothing else is; a clean history raises
//! nothing at all.

use tandem_verify::{check, FinalRead, History, Kind, Op, Outcome, Report, Txn};

fn a(key: u64, value: u64) -> Op {
    Op::Append { key, value }
}

fn r(key: u64, values: &[u64]) -> Op {
    Op::Read { key, values: values.to_vec(), synced: false }
}

fn synced(key: u64, values: &[u64]) -> Op {
    Op::Read { key, values: values.to_vec(), synced: true }
}

/// Transaction `id`, run serially: invoked at 10·id, acknowledged 5 later.
fn ok(id: u64, ops: Vec<Op>) -> Txn {
    Txn { id, node: 0, invoked: 10 * id, completed: Some(10 * id + 5), outcome: Outcome::Ok, ops }
}

fn ended(id: u64, outcome: Outcome, ops: Vec<Op>) -> Txn {
    Txn { outcome, ..ok(id, ops) }
}

/// The same final list of `key` on nodes 0, 1 and 2.
fn everywhere(key: u64, values: &[u64]) -> Vec<FinalRead> {
    (0..3).map(|node| FinalRead { node, key, values: values.to_vec() }).collect()
}

/// The transactions all began before any was acknowledged.
fn overlapping(txns: Vec<Txn>) -> Vec<Txn> {
    let n = txns.len() as u64;
    txns.into_iter().enumerate().map(|(i, t)| Txn { invoked: i as u64, completed: Some(n + i as u64), ..t }).collect()
}

fn history(txns: Vec<Txn>, finals: Vec<Vec<FinalRead>>) -> History {
    History { txns, final_reads: finals.into_iter().flatten().collect() }
}

/// Exactly `expected` (kind, count), and no other kind.
fn assert_found(report: &Report, expected: &[(Kind, usize)]) {
    for kind in Kind::ALL {
        let want = expected.iter().find(|(k, _)| *k == kind).map_or(0, |(_, n)| *n);
        assert_eq!(report.count(kind), want, "{}: {report}", kind.name());
    }
}

#[test]
fn a_clean_history_raises_nothing() {
    let h = history(
        vec![ok(1, vec![a(1, 1)]), ok(2, vec![synced(1, &[1]), a(1, 2), r(1, &[1, 2])]), ok(3, vec![r(1, &[1, 2])])],
        vec![everywhere(1, &[1, 2])],
    );
    let report = check(&h);
    assert!(report.findings.is_empty(), "{report}");
    assert!(report.is_clean());
}

#[test]
fn an_acknowledged_append_missing_at_the_end_is_lost() {
    let h = history(vec![ok(1, vec![a(1, 1)]), ok(2, vec![a(1, 2)])], vec![everywhere(1, &[1])]);
    let report = check(&h);
    assert_found(&report, &[(Kind::Lost, 1)]);
    assert_eq!(report.of(Kind::Lost).next().unwrap().txns, vec![2]);
}

#[test]
fn a_write_on_some_nodes_only_is_lost_there_and_divergent() {
    let mut finals = everywhere(1, &[1, 2]);
    finals[1].values = vec![1];
    let h = history(vec![ok(1, vec![a(1, 1)]), ok(2, vec![a(1, 2)])], vec![finals]);
    let report = check(&h);
    assert_found(&report, &[(Kind::Lost, 1), (Kind::Divergent, 1)]);
    assert!(report.of(Kind::Lost).next().unwrap().detail.contains("nodes [1]"), "{report}");
}

#[test]
fn an_unacknowledged_append_may_be_missing() {
    let h = history(vec![ok(1, vec![a(1, 1)]), ended(2, Outcome::Unknown, vec![a(1, 2)])], vec![everywhere(1, &[1])]);
    assert_found(&check(&h), &[]);
}

#[test]
fn a_value_read_twice_is_duplicated() {
    let h = history(vec![ok(1, vec![a(1, 1)]), ok(2, vec![r(1, &[1, 1])])], vec![everywhere(1, &[1, 1])]);
    let report = check(&h);
    // Txn 2's read and each node's final read.
    assert_found(&report, &[(Kind::Duplicated, 4)]);
}

#[test]
fn a_value_nobody_appended_is_garbage() {
    let h = history(vec![ok(1, vec![a(1, 1)]), ok(2, vec![r(1, &[1, 9])])], vec![everywhere(1, &[1])]);
    let report = check(&h);
    // The final lists are prefixes of the longer one read.
    assert_found(&report, &[(Kind::Garbage, 1)]);
}

#[test]
fn a_value_of_a_rolled_back_txn_read_is_g1a() {
    let h = history(vec![ended(1, Outcome::Aborted, vec![a(1, 1)]), ok(2, vec![r(1, &[1])])], vec![everywhere(1, &[])]);
    let report = check(&h);
    assert_found(&report, &[(Kind::AbortedRead, 1)]);
    assert_eq!(report.of(Kind::AbortedRead).next().unwrap().txns, vec![2, 1]);
}

#[test]
fn a_read_that_stops_mid_transaction_is_g1b() {
    let h = history(
        overlapping(vec![ok(1, vec![a(1, 1), a(1, 2)]), ok(2, vec![r(1, &[1])])]),
        vec![everywhere(1, &[1, 2])],
    );
    let report = check(&h);
    // Txn 2 saw part of txn 1 and missed the rest: also a cycle with one
    // anti-dependency (1 -wr-> 2 -rw-> 1).
    assert_found(&report, &[(Kind::IntermediateRead, 1), (Kind::GSingle, 1)]);
}

#[test]
fn a_txn_that_misses_its_own_append_is_internally_inconsistent() {
    let h = history(vec![ok(1, vec![r(1, &[]), a(1, 1), r(1, &[])])], vec![everywhere(1, &[1])]);
    let report = check(&h);
    assert_found(&report, &[(Kind::Internal, 1)]);
}

/// InnoDB's REPEATABLE READ without snapshot isolation: the append (an
/// UPDATE, a read of the latest version) takes in another transaction's
/// append that the transaction's snapshot did not show, and the next read
/// shows it. The finding names the value that came from elsewhere.
#[test]
fn a_txn_whose_append_took_in_a_newer_version_is_internally_inconsistent() {
    let h = history(
        overlapping(vec![ok(1, vec![r(1, &[]), a(1, 1), r(1, &[2, 1])]), ok(2, vec![a(1, 2)])]),
        vec![everywhere(1, &[2, 1])],
    );
    let report = check(&h);
    assert!(report.count(Kind::Internal) == 1, "{report}");
    let finding = report.of(Kind::Internal).next().unwrap();
    assert!(finding.detail.contains("it has [2] besides, lacks []"), "{report}");
}

#[test]
fn reads_off_one_order_are_non_prefix() {
    let h = history(
        vec![ok(1, vec![a(1, 1)]), ok(2, vec![a(1, 2)]), ok(3, vec![r(1, &[2])])],
        vec![everywhere(1, &[1, 2])],
    );
    let report = check(&h);
    assert_found(&report, &[(Kind::NonPrefix, 1)]);
    assert_eq!(report.of(Kind::NonPrefix).next().unwrap().txns, vec![3]);
}

#[test]
fn write_orders_that_disagree_between_keys_are_g0() {
    // Key 1 installs txn 1 then 2, key 2 txn 2 then 1.
    let h = history(
        overlapping(vec![ok(1, vec![a(1, 1), a(2, 2)]), ok(2, vec![a(1, 3), a(2, 4)])]),
        vec![everywhere(1, &[1, 3]), everywhere(2, &[4, 2])],
    );
    let report = check(&h);
    assert_found(&report, &[(Kind::G0, 1)]);
    let cycle = report.of(Kind::G0).next().unwrap();
    assert_eq!(cycle.txns, vec![1, 2], "{report}");
    assert!(cycle.detail.contains("-ww->") && !cycle.detail.contains("-wr->"), "{report}");
}

#[test]
fn two_txns_that_read_each_other_are_g1c() {
    let h = history(
        overlapping(vec![ok(1, vec![a(1, 1), r(2, &[2])]), ok(2, vec![a(2, 2), r(1, &[1])])]),
        vec![everywhere(1, &[1]), everywhere(2, &[2])],
    );
    let report = check(&h);
    assert_found(&report, &[(Kind::G1c, 1)]);
}

#[test]
fn a_lost_update_is_g_single() {
    // Both read the empty list, both append: the second overwrote what
    // it never saw.
    let h = history(
        overlapping(vec![ok(1, vec![r(1, &[]), a(1, 1)]), ok(2, vec![r(1, &[]), a(1, 2)])]),
        vec![everywhere(1, &[1, 2])],
    );
    let report = check(&h);
    assert_found(&report, &[(Kind::GSingle, 1)]);
    let cycle = report.of(Kind::GSingle).next().unwrap();
    assert_eq!(cycle.detail.matches("-rw->").count(), 1, "{report}");
}

#[test]
fn write_skew_is_g2() {
    let h = history(
        overlapping(vec![ok(1, vec![r(1, &[]), r(2, &[]), a(1, 1)]), ok(2, vec![r(1, &[]), r(2, &[]), a(2, 2)])]),
        vec![everywhere(1, &[1]), everywhere(2, &[2])],
    );
    let report = check(&h);
    assert_found(&report, &[(Kind::G2, 1)]);
    assert_eq!(report.of(Kind::G2).next().unwrap().detail.matches("-rw->").count(), 2, "{report}");
}

#[test]
fn a_read_that_misses_an_earlier_acknowledged_write_is_stale() {
    let h = history(
        vec![
            ok(1, vec![a(1, 1)]),
            // Invoked after txn 1 was acknowledged, and blind to it.
            ok(2, vec![synced(1, &[])]),
            ok(3, vec![r(1, &[])]),
        ],
        vec![everywhere(1, &[1])],
    );
    let report = check(&h);
    assert_found(&report, &[(Kind::StaleSynced, 1), (Kind::StaleUnsynced, 1)]);
    assert_eq!(report.of(Kind::StaleSynced).next().unwrap().txns, vec![2, 1]);
    assert!(!report.is_clean());
}

#[test]
fn a_read_that_began_before_the_write_was_acknowledged_is_not_stale() {
    let mut early = ok(2, vec![synced(1, &[])]);
    early.invoked = 12; // txn 1 is acknowledged at 15
    let h = history(vec![ok(1, vec![a(1, 1)]), early], vec![everywhere(1, &[1])]);
    assert_found(&check(&h), &[]);
}

#[test]
fn unsynced_stale_reads_alone_leave_the_history_clean() {
    let h = history(vec![ok(1, vec![a(1, 1)]), ok(2, vec![r(1, &[])])], vec![everywhere(1, &[1])]);
    let report = check(&h);
    assert_found(&report, &[(Kind::StaleUnsynced, 1)]);
    assert!(report.is_clean());
}

#[test]
fn a_value_appended_twice_is_the_workloads_own_error() {
    let h = history(vec![ok(1, vec![a(1, 1)]), ok(2, vec![a(1, 1)])], vec![everywhere(1, &[1])]);
    let report = check(&h);
    assert_eq!(report.count(Kind::DuplicateAppend), 1, "{report}");
    assert_eq!(report.of(Kind::DuplicateAppend).next().unwrap().txns, vec![1, 2]);
}

#[test]
fn a_non_prefix_finding_says_where_the_read_leaves_the_order() {
    let h = history(
        vec![ok(1, vec![a(1, 1)]), ok(2, vec![a(1, 2)]), ok(3, vec![a(1, 3)]), ok(4, vec![r(1, &[1, 3])])],
        vec![everywhere(1, &[1, 2, 3])],
    );
    let report = check(&h);
    let finding = report.of(Kind::NonPrefix).next().expect("non-prefix");
    assert!(finding.detail.contains("at position 1 of 2 it has 3, the order 2"), "{report}");
}
