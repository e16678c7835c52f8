//! Leaving while out of the primary component: a member cut off from the
//! others is stopped cleanly (a DBA stops a node of the minority side).

use super::*;

/// n3, a follower without the writer, is cut off from both others while
/// n2 writes; once it knows it is not primary, it leaves. Nobody can let it
/// go, so its leave must end on its own and say why, rather than wait for
/// a leader it cannot reach (the hosted member's leave has no deadline:
/// such a wait never ends, and the run fails at `SIM_LIMIT`). Its process
/// then ends (killed, as a stop that has left ends it), the links mend, and
/// n1 and n2 go on under the same leader: every payload of the writer
/// once, in order, on both.
pub(super) fn cut_off_member_leaves(seed: u64) -> Outcome {
    let (mut sim, seats, writers) = three_writing(seed);
    let victim = 2;
    assert_ne!(leader_seat(&seats), victim, "seed {seed}: n3 follows");
    for other in [HOSTS[0], HOSTS[1]] {
        sim.partition(HOSTS[victim], other);
    }
    step_until(&mut sim, "n3 knows it is cut off", || !seats[victim].primary.load(Ordering::SeqCst));
    seats[victim].leave.store(true, Ordering::SeqCst);
    step_until(&mut sim, "n3's leave ended", || seats[victim].left.lock().unwrap().is_some());
    let left = seats[victim].left.lock().unwrap().clone().unwrap();
    let why = left.expect_err("nobody could let n3 go");
    assert!(why.contains("not primary"), "seed {seed}: n3's leave: {why}");
    kill(&mut sim, &seats, victim);
    for other in [HOSTS[0], HOSTS[1]] {
        sim.repair(HOSTS[victim], other);
    }
    let stay = [seats[0].clone(), seats[1].clone()];
    let after = stay[1].rec().messages().len();
    step_until(&mut sim, "200 payloads more applied by n1 and n2", || {
        stay.iter().all(|s| s.rec().messages().len() >= after + 200)
    });
    end_of_run(seed, &mut sim, &stay, &writers, Promise::EveryPayloadOnce)
}

#[test]
fn a_member_cut_off_leaves_without_waiting_for_a_leader_under_simulation() {
    run_seeds(cut_off_member_leaves);
}
