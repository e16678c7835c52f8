//! A writer on the leader. The engine submits on whichever node its client
//! is on, the leader included, where a payload goes straight to the Raft
//! core instead of being forwarded; the other scenarios write on followers.

use super::*;

/// n1 founded the group, leads, and writes (writer 1) while n2 writes too
/// (writer 0); n1 is killed with -9 once it applied 100 of its own
/// payloads. What n1 had applied before, its own payloads among it (what
/// its clients were told had committed), was committed on a majority, so
/// it must begin every history after. The others go on under a new leader,
/// n1 comes back as itself, as a follower, and in the end all three
/// applied one history in which each writer's payloads rise, each at most
/// once (what was in flight on n1 when it died may be lost).
pub(super) fn leader_writing_killed(seed: u64) -> Outcome {
    let (mut sim, seats, writers) = start_writing(seed, &[1, 0], false, false, false);
    assert_eq!(leader_seat(&seats), 0, "seed {seed}: n1, which founded the group, leads");
    step_until(&mut sim, "the leader applied 100 of its own payloads", || {
        per_writer(&seats[0].rec()).get(&1).is_some_and(|own| own.len() >= 100)
    });
    let acknowledged = seats[0].rec().events();
    let id = kill(&mut sim, &seats, 0);
    let after = seats[1].rec().messages().len();
    step_until(&mut sim, "200 payloads applied by the two others", || {
        [1, 2].iter().all(|&o| seats[o].rec().messages().len() >= after + 200)
    });
    sim.bounce(HOSTS[0]);
    step_until(&mut sim, "the old leader started again", || seats[0].starts.load(Ordering::SeqCst) == 2);
    assert_eq!(*seats[0].id.lock().unwrap(), id, "seed {seed}: the old leader came back as itself");
    let outcome = end_of_run(seed, &mut sim, &seats, &writers, Promise::Rising);
    for (i, history) in outcome.histories.iter().enumerate() {
        assert!(
            history.starts_with(&acknowledged),
            "seed {seed}, member {i}: the {} events n1 applied before it was killed begin its history",
            acknowledged.len()
        );
    }
    outcome
}

#[test]
fn a_leader_killed_while_it_writes_keeps_what_it_acknowledged_under_simulation() {
    run_seeds(leader_writing_killed);
}
