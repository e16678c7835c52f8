use super::*;
use crate::writeset::{flags, Key};
use proptest::prelude::*;

const A: Uuid = Uuid([1; 16]);
const B: Uuid = Uuid([2; 16]);

fn ws(source: Uuid, last_seen: Seqno, keys: &[(&[&str], KeyType)]) -> WriteSet {
    WriteSet {
        source,
        trx_id: 1,
        conn_id: 1,
        flags: flags::TRX_START | flags::TRX_END,
        last_seen,
        safe: last_seen,
        keys: keys
            .iter()
            .map(|(parts, kind)| Key { parts: parts.iter().map(|p| p.as_bytes().to_vec()).collect(), kind: *kind })
            .collect(),
        data: vec![],
    }
}

const ROW: &[&str] = &["db", "t", "pk1"];

/// The whole matrix, written out as (earlier, incoming, expected) so a reader
/// can check it against the documented rule line by line.
#[test]
fn matrix_table_for_unseen_write_from_other_node() {
    use KeyType::*;
    let table = [
        (Shared, Shared, N),
        (Shared, Reference, N),
        (Shared, Update, D),
        (Shared, Exclusive, D),
        (Reference, Shared, N),
        (Reference, Reference, N),
        (Reference, Update, D),
        (Reference, Exclusive, C),
        (Update, Shared, D),
        (Update, Reference, D),
        (Update, Update, C),
        (Update, Exclusive, C),
        (Exclusive, Shared, C),
        (Exclusive, Reference, C),
        (Exclusive, Update, C),
        (Exclusive, Exclusive, C),
    ];
    for (earlier, incoming, expected) in table {
        let mut cert = Certifier::new(0);
        assert_eq!(cert.certify(&ws(A, 0, &[(ROW, earlier)]), 1, 1), Verdict::Pass { depends_on: 0 });
        let got = cert.certify(&ws(B, 0, &[(ROW, incoming)]), 2, 1);
        let want = match expected {
            N => Verdict::Pass { depends_on: 0 },
            D => Verdict::Pass { depends_on: 1 },
            C => Verdict::Fail,
        };
        assert_eq!(got, want, "earlier {earlier:?}, incoming {incoming:?}");
    }
}

/// A fragment after the first of a streaming transaction waits for all
/// before it (the server applies one transaction's fragments on one
/// applier); the first fragment applies in parallel like any write-set.
#[test]
fn later_fragments_of_a_stream_wait_for_everything_before_them() {
    let mut cert = Certifier::new(0);
    let other_row: &[&str] = &["db", "t", "pk9"];
    assert_eq!(cert.certify(&ws(B, 0, &[(other_row, KeyType::Exclusive)]), 1, 1), Verdict::Pass { depends_on: 0 });
    let mut first = ws(A, 0, &[(ROW, KeyType::Exclusive)]);
    first.flags = flags::TRX_START;
    assert_eq!(cert.certify(&first, 2, 1), Verdict::Pass { depends_on: 0 });
    assert_eq!(
        cert.certify(&ws(B, 0, &[(&["db", "t", "pk7"], KeyType::Exclusive)]), 3, 1),
        Verdict::Pass { depends_on: 0 }
    );
    let mut middle = ws(A, 0, &[(&["db", "t", "pk2"], KeyType::Exclusive)]);
    middle.flags = 0;
    assert_eq!(cert.certify(&middle, 4, 1), Verdict::Pass { depends_on: 3 });
    // The fragment's rows were indexed: another node's unseen write fails.
    assert_eq!(cert.certify(&ws(B, 3, &[(&["db", "t", "pk2"], KeyType::Exclusive)]), 5, 1), Verdict::Fail);
    let mut commit = ws(A, 3, &[(&["db", "t"], KeyType::Shared)]);
    commit.flags = flags::TRX_END | flags::PA_UNSAFE;
    assert_eq!(cert.certify(&commit, 6, 1), Verdict::Pass { depends_on: 5 });
}

/// A rollback fragment cannot lose: even when the index has forgotten what
/// its transaction saw, it passes, after everything before it, and
/// everything after waits for it (it is PA_UNSAFE).
#[test]
fn a_stream_rollback_always_passes_and_orders_what_follows() {
    let mut cert = Certifier::new(0);
    cert.certify(&ws(B, 0, &[(ROW, KeyType::Exclusive)]), 1, 1);
    cert.purge(1);
    let mut rollback = ws(A, 0, &[]);
    rollback.flags = flags::ROLLBACK | flags::PA_UNSAFE;
    assert_eq!(cert.certify(&rollback, 2, 1), Verdict::Pass { depends_on: 1 });
    assert_eq!(
        cert.certify(&ws(B, 2, &[(&["db", "t", "pk3"], KeyType::Exclusive)]), 3, 1),
        Verdict::Pass { depends_on: 2 }
    );
}

#[test]
fn conflict_needs_the_earlier_write_to_be_unseen() {
    let mut cert = Certifier::new(0);
    cert.certify(&ws(A, 0, &[(ROW, KeyType::Exclusive)]), 1, 1);
    // B saw seqno 1 before writing the same row: a dependency, not a conflict.
    assert_eq!(cert.certify(&ws(B, 1, &[(ROW, KeyType::Exclusive)]), 2, 1), Verdict::Pass { depends_on: 1 });
}

#[test]
fn same_node_writes_only_depend() {
    // The origin's own locks already serialised them.
    let mut cert = Certifier::new(0);
    cert.certify(&ws(A, 0, &[(ROW, KeyType::Exclusive)]), 1, 1);
    assert_eq!(cert.certify(&ws(A, 0, &[(ROW, KeyType::Exclusive)]), 2, 1), Verdict::Pass { depends_on: 1 });
}

#[test]
fn a_restarted_node_conflicts_with_its_previous_incarnation() {
    // The locks that serialised the earlier write-set died with the process
    // that held them: after a restart, the node's write-set that could not
    // see it loses like anybody else's.
    let mut cert = Certifier::new(0);
    cert.certify(&ws(A, 0, &[(ROW, KeyType::Exclusive)]), 1, 1);
    assert_eq!(cert.certify(&ws(A, 0, &[(ROW, KeyType::Exclusive)]), 2, 2), Verdict::Fail);
    assert_eq!(cert.certify(&ws(A, 1, &[(ROW, KeyType::Exclusive)]), 3, 2), Verdict::Pass { depends_on: 1 });
}

fn session(incarnation: u32, epoch: u32) -> LockSession {
    LockSession { incarnation, epoch }
}

#[test]
fn a_new_lock_epoch_conflicts_with_the_unseen_write_sets_of_earlier_epochs() {
    // Seqno 1's client gave up (or it was rolled back to replay): its locks
    // are gone, and a later transaction of the same process that did not
    // see it read what it overwrites.
    let mut cert = Certifier::new(0);
    cert.certify(&ws(A, 0, &[(ROW, KeyType::Exclusive)]), 1, session(1, 0));
    assert_eq!(cert.certify(&ws(A, 0, &[(ROW, KeyType::Exclusive)]), 2, session(1, 1)), Verdict::Fail);
    // One that saw it depends on it.
    assert_eq!(
        cert.certify(&ws(A, 1, &[(ROW, KeyType::Exclusive)]), 3, session(1, 1)),
        Verdict::Pass { depends_on: 1 }
    );
    // Within the new epoch the locks order the process's write-sets again.
    assert_eq!(
        cert.certify(&ws(A, 1, &[(ROW, KeyType::Exclusive)]), 4, session(1, 1)),
        Verdict::Pass { depends_on: 3 }
    );
}

#[test]
fn epochs_are_counted_from_where_the_total_order_first_shows_them() {
    let mut cert = Certifier::new(0);
    cert.certify(&ws(A, 0, &[(ROW, KeyType::Exclusive)]), 1, session(1, 2));
    cert.certify(&ws(A, 0, &[(&["db", "t", "pk2"], KeyType::Exclusive)]), 2, session(1, 3));
    // Epoch 3 began at seqno 2: seqno 1 (epoch 2) is another epoch's.
    assert_eq!(cert.certify(&ws(A, 0, &[(ROW, KeyType::Exclusive)]), 3, session(1, 3)), Verdict::Fail);
    assert_eq!(
        cert.certify(&ws(A, 0, &[(&["db", "t", "pk2"], KeyType::Exclusive)]), 4, session(1, 3)),
        Verdict::Pass { depends_on: 2 }
    );
    // A message of an older session ordered late spares nothing: its
    // process's locks are gone.
    assert_eq!(cert.certify(&ws(A, 0, &[(&["db", "t", "pk2"], KeyType::Exclusive)]), 5, session(1, 2)), Verdict::Fail);
    // A restarted process starts at epoch 0 again; its own write-sets
    // serialise each other, the old process's do not.
    assert_eq!(cert.certify(&ws(A, 0, &[(ROW, KeyType::Exclusive)]), 6, session(2, 0)), Verdict::Fail);
    cert.certify(&ws(A, 4, &[(ROW, KeyType::Exclusive)]), 7, session(2, 0));
    assert_eq!(
        cert.certify(&ws(A, 4, &[(ROW, KeyType::Exclusive)]), 8, session(2, 0)),
        Verdict::Pass { depends_on: 7 }
    );
}

/// A forward whose answer was lost can reach the leader after its node's
/// later messages: a write-set of an older epoch, ordered after the newer
/// epoch began, is never spared by the newer epoch's write-sets either.
#[test]
fn a_write_set_of_an_older_epoch_ordered_late_spares_nobody() {
    let mut cert = Certifier::new(0);
    cert.certify(&ws(A, 0, &[(&["db", "t", "pk2"], KeyType::Exclusive)]), 1, session(1, 3));
    // Epoch 0's write-set, sent before epoch 3 began, ordered after it.
    assert_eq!(
        cert.certify(&ws(A, 0, &[(ROW, KeyType::Exclusive)]), 2, session(1, 0)),
        Verdict::Pass { depends_on: 0 }
    );
    // Epoch 3's next write-set did not see it: a conflict, though the
    // seqno is past where epoch 3 began.
    assert_eq!(cert.certify(&ws(A, 1, &[(ROW, KeyType::Exclusive)]), 3, session(1, 3)), Verdict::Fail);
}

#[test]
fn failed_write_set_is_not_indexed() {
    let mut cert = Certifier::new(0);
    cert.certify(&ws(A, 0, &[(ROW, KeyType::Exclusive)]), 1, 1);
    assert_eq!(cert.certify(&ws(B, 0, &[(ROW, KeyType::Exclusive)]), 2, 1), Verdict::Fail);
    // A third write that saw 1 must not depend on (or clash with) the loser 2.
    assert_eq!(cert.certify(&ws(B, 1, &[(ROW, KeyType::Exclusive)]), 3, 1), Verdict::Pass { depends_on: 1 });
}

#[test]
fn toi_on_table_conflicts_with_unseen_row_write_on_that_table() {
    let mut cert = Certifier::new(0);
    let mut toi = ws(A, 0, &[(&["db", "t"], KeyType::Exclusive)]);
    toi.flags |= flags::ISOLATION;
    assert_eq!(cert.certify(&toi, 1, 1), Verdict::Pass { depends_on: 0 });
    // Same node, but TOI conflicts regardless of origin.
    assert_eq!(cert.certify(&ws(A, 0, &[(ROW, KeyType::Update)]), 2, 1), Verdict::Fail);
    // Another table: no conflict, but it still applies after the TOI.
    assert_eq!(cert.certify(&ws(B, 0, &[(&["db", "u", "1"], KeyType::Update)]), 3, 1), Verdict::Pass { depends_on: 1 });
}

#[test]
fn toi_is_never_refused_and_waits_for_all_before_it() {
    let mut cert = Certifier::new(0);
    cert.certify(&ws(A, 0, &[(ROW, KeyType::Exclusive)]), 1, 1);
    let mut toi = ws(B, 0, &[(&["db", "t"], KeyType::Exclusive)]);
    toi.flags |= flags::ISOLATION;
    assert_eq!(cert.certify(&toi, 5, 1), Verdict::Pass { depends_on: 4 });
}

#[test]
fn pa_unsafe_depends_on_previous_and_orders_later_ones() {
    let mut cert = Certifier::new(0);
    let mut w = ws(A, 0, &[(&["db", "x", "1"], KeyType::Exclusive)]);
    w.flags |= flags::PA_UNSAFE;
    assert_eq!(cert.certify(&w, 3, 1), Verdict::Pass { depends_on: 2 });
    assert_eq!(
        cert.certify(&ws(B, 3, &[(&["db", "y", "1"], KeyType::Exclusive)]), 4, 1),
        Verdict::Pass { depends_on: 3 }
    );
}

#[test]
fn key_parts_are_not_confused_by_concatenation() {
    let mut cert = Certifier::new(0);
    cert.certify(&ws(A, 0, &[(&["ab", "c", "1"], KeyType::Exclusive)]), 1, 1);
    assert_eq!(
        cert.certify(&ws(B, 0, &[(&["a", "bc", "1"], KeyType::Exclusive)]), 2, 1),
        Verdict::Pass { depends_on: 0 }
    );
}

#[test]
fn purge_forgets_old_uses_and_fails_too_old_write_sets() {
    let mut cert = Certifier::new(0);
    cert.certify(&ws(A, 0, &[(ROW, KeyType::Exclusive)]), 1, 1);
    cert.certify(&ws(A, 1, &[(&["db", "t", "pk2"], KeyType::Exclusive)]), 2, 1);
    cert.purge(1);
    assert_eq!(cert.purged_upto(), 1);
    // Only pk2 (seqno 2) and the shared branches it refreshed remain.
    assert!(cert.index_size() >= 1);
    assert_eq!(cert.certify(&ws(B, 0, &[(&["db", "z", "9"], KeyType::Exclusive)]), 3, 1), Verdict::Fail);
    assert_eq!(cert.certify(&ws(B, 1, &[(ROW, KeyType::Exclusive)]), 4, 1), Verdict::Pass { depends_on: 1 });
}

/// Snapshots of earlier builds wrote a lock session as a pair of u32s:
/// the struct must keep those bytes, or those snapshots stop decoding.
#[test]
fn a_lock_session_encodes_as_the_pair_earlier_snapshots_hold() {
    let start = EpochStart { session: session(7, 3), since: 42 };
    let pair: ((u32, u32), Seqno) = ((7, 3), 42);
    assert_eq!(bincode::serialize(&start).unwrap(), bincode::serialize(&pair).unwrap());
}

fn arb_ws() -> impl Strategy<Value = (bool, u8, u8, u8)> {
    (any::<bool>(), 0u8..4, 0u8..4, 0u8..6)
}

proptest! {
    /// Certification is a function of the ordered input: two replicas fed the
    /// same sequence agree on every verdict, and depends_on always points back.
    #[test]
    fn replicas_agree_and_dependencies_point_backwards(stream in prop::collection::vec(arb_ws(), 1..200)) {
        let mut one = Certifier::new(0);
        let mut two = Certifier::new(0);
        for (i, (from_a, kind, row, lag)) in stream.into_iter().enumerate() {
            let seqno = i as Seqno + 1;
            let row = format!("{row}");
            let w = ws(if from_a { A } else { B }, (seqno - 1 - lag as Seqno).max(0),
                       &[(&["db", "t", row.as_str()], KeyType::ALL[kind as usize])]);
            let v1 = one.certify(&w, seqno, 1);
            let v2 = two.certify(&w, seqno, 1);
            prop_assert_eq!(&v1, &v2);
            if let Verdict::Pass { depends_on } = v1 {
                prop_assert!(depends_on < seqno);
            }
            if seqno % 17 == 0 {
                one.purge(seqno - 8);
                two.purge(seqno - 8);
            }
        }
        prop_assert_eq!(one, two);
    }

    /// A write-set that saw everything before it never fails.
    #[test]
    fn fully_informed_write_sets_always_pass(stream in prop::collection::vec(arb_ws(), 1..100)) {
        let mut cert = Certifier::new(0);
        for (i, (from_a, kind, row, _)) in stream.into_iter().enumerate() {
            let seqno = i as Seqno + 1;
            let row = format!("{row}");
            let w = ws(if from_a { A } else { B }, seqno - 1, &[(&["db", "t", row.as_str()], KeyType::ALL[kind as usize])]);
            let passed = matches!(cert.certify(&w, seqno, 1), Verdict::Pass { .. });
            prop_assert!(passed, "write-set {} failed", seqno);
        }
    }
}

/// Two members that certified the same write-sets hold the same index, and
/// write it out as the same bytes (a snapshot, a checkpoint), although each
/// hash map keeps its keys in an order of its own.
#[test]
fn the_same_index_is_written_as_the_same_bytes_on_every_member() {
    let (mut one, mut two) = (Certifier::new(0), Certifier::new(0));
    for seqno in 1..=300 {
        let row = format!("pk{seqno}");
        let w = ws(A, seqno - 1, &[(&["db", "t", row.as_str()], KeyType::Exclusive)]);
        one.certify(&w, seqno, 1);
        two.certify(&w, seqno, 1);
    }
    assert_eq!(one, two);
    let order = |c: &Certifier| c.index.keys().cloned().collect::<Vec<_>>();
    assert_ne!(order(&one), order(&two), "the two maps keep their keys in orders of their own");
    let bytes = bincode::serialize(&one).expect("encode");
    assert_eq!(bytes, bincode::serialize(&two).expect("encode"), "the same state, the same bytes");
    let back: Certifier = bincode::deserialize(&bytes).expect("decode");
    assert_eq!(back.index, one.index, "read back whole (the lock epochs travel apart, in `GroupState::encode`)");
}
