//! A restart that catches its log up from a member other than the leader
//! (`catch_up`), with that member killed half-way.

use super::common::count_logged_here;
use super::*;

/// Every log is purged under load (64 KiB each) but n2's, which releases
/// nothing and so keeps its whole history (as a node frozen with
/// `gcache.freeze_purge_at_seqno`). n3 is killed and the others order
/// 3,000 payloads: the leader's log no longer holds what n3 missed, n2's
/// does. n3 starts again and catches up from n2 in batches of about 1 KiB;
/// once it appended the first, n2 is killed with -9 (and started again a
/// second later). n3 keeps the prefix it appended (committed entries, in order),
/// has no other member but the leader to go on with, and gets the rest from
/// the leader (a snapshot of the group state, its log being purged). It
/// comes back as itself, and in the end all three applied one history in
/// which the writer's payloads rise, each at most once (n2's writer lost
/// what was in flight when n2 died).
pub(super) fn donor_killed_mid_catch_up(seed: u64) -> Outcome {
    let (mut sim, seats, writers) = start_three_with(seed, false, false, true);
    let (donor, victim) = (1, 2);
    assert_eq!(leader_seat(&seats), 0, "seed {seed}: n1, which founded the group, leads");
    seats[donor].keeps_history.store(true, Ordering::SeqCst);
    let id = kill(&mut sim, &seats, victim);
    let after = seats[donor].rec().messages().len();
    step_until(&mut sim, "3000 payloads applied while n3 is down", || {
        seats[donor].rec().messages().len() >= after + 3000
    });
    seats[victim].catch_up_batch.store(1 << 10, Ordering::SeqCst);
    let (appended_before, stopped_before) = (appended(), stopped_early());
    sim.bounce(HOSTS[victim]);
    step_until(&mut sim, "n3 appended a first batch from n2", || appended() > appended_before);
    kill(&mut sim, &seats, donor);
    step_until(&mut sim, "n3 started again", || seats[victim].starts.load(Ordering::SeqCst) == 2);
    assert!(stopped_early() > stopped_before, "seed {seed}: n2 was killed before or after n3's catch-up, not in it");
    assert_eq!(*seats[victim].id.lock().unwrap(), id, "seed {seed}: n3 came back as itself");
    step_for(&mut sim, Duration::from_secs(1));
    sim.bounce(HOSTS[donor]);
    let after: Vec<usize> = seats.iter().map(|s| s.rec().messages().len()).collect();
    step_until(&mut sim, "200 payloads more applied by all three", || {
        seats.iter().zip(&after).all(|(s, a)| s.rec().messages().len() >= a + 200)
    });
    end_of_run(seed, &mut sim, &seats, &writers, Promise::Rising)
}

/// How many catch-ups from n2 appended a first batch (and later ones
/// every 5 s: the progress line).
fn appended() -> usize {
    count_logged_here(&["Catching up the group log from member", "(n2): at log index"])
}

/// How many catch-ups from n2 stopped before their end.
fn stopped_early() -> usize {
    count_logged_here(&["Catching up from member", "(n2) stopped at log index"])
}

#[test]
fn a_donor_killed_mid_catch_up_leaves_one_history_under_simulation() {
    run_seeds(donor_killed_mid_catch_up);
}
