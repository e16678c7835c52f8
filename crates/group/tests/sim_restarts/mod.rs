//! Members killed, powered off, or left behind the purge under load, and
//! the whole group crashed: each comes back as itself (or by the leader's
//! snapshot), and the histories stay one.

use super::*;

/// Kills member `i` with -9: its disk as `MemStorage::kill` leaves it
/// (taken first, so that nothing dropping the process writes counts), its
/// connections silent (`sim_net::power_cut`). Returns its member id.
pub(super) fn kill(sim: &mut turmoil::Sim<'_>, seats: &[Arc<Seat>], i: usize) -> Option<MemberId> {
    let id = *seats[i].id.lock().unwrap();
    {
        let mut disk = seats[i].disk.lock().unwrap();
        *disk = disk.kill();
    }
    sim_net::power_cut(|| sim.crash(HOSTS[i]));
    id
}

/// Cuts member `i`'s power: its disk as `sim_disk::power_cut` leaves it,
/// its connections silent. Returns its member id and the bytes torn.
fn power_loss(
    sim: &mut turmoil::Sim<'_>,
    seats: &[Arc<Seat>],
    i: usize,
    draw: &mut dyn FnMut() -> u64,
) -> (Option<MemberId>, u64) {
    let id = *seats[i].id.lock().unwrap();
    let torn = {
        let mut disk = seats[i].disk.lock().unwrap();
        let (after, torn) = sim_disk::power_cut(&disk, draw);
        *disk = after;
        torn
    };
    sim_net::power_cut(|| sim.crash(HOSTS[i]));
    (id, torn)
}

/// A follower (neither the leader nor the writer's host) is killed with -9
/// while n2 writes: its disk keeps every write, its memory is gone, and its
/// connections go silent (no FIN: `sim_net::power_cut`). It starts again
/// after a pause, from its disk, as itself, and catches up.
/// Nothing the writer submitted is lost (its leader never changed), and in
/// the end all three applied the same history.
pub(super) fn follower_killed_under_load(seed: u64) -> Outcome {
    let (mut sim, seats, writers) = three_writing(seed);
    let leader = leader_seat(&seats);
    let victim = (0..3).find(|i| *i != leader && *i != 1).expect("a follower without the writer");
    let id = kill(&mut sim, &seats, victim);
    follower_back(seed, sim, &seats, &writers, victim, id)
}

/// As [`follower_killed_under_load`], but the follower loses power, with
/// `gcache.fsync` off (as it ships): its log loses what it wrote since the
/// OS last wrote it back, torn at a point the seed draws, and files it
/// created may be gone. The leader and the other follower still hold what
/// it acknowledged; it comes back as itself and catches up.
pub(super) fn follower_lost_power_under_load(seed: u64) -> Outcome {
    let (mut sim, seats, writers) = three_writing(seed);
    let leader = leader_seat(&seats);
    let victim = (0..3).find(|i| *i != leader && *i != 1).expect("a follower without the writer");
    let (id, torn) = power_loss(&mut sim, &seats, victim, &mut sim_disk::tear_draws(seed));
    eprintln!("seed {seed}: the power cut tore {torn} bytes of the follower's writes");
    follower_back(seed, sim, &seats, &writers, victim, id)
}

/// Starts the follower `victim` again once n2 applied 200 more payloads,
/// checks it came back as itself and applied 200 more, then ends the run:
/// nothing the writer submitted may be lost (its leader never changed).
fn follower_back(
    seed: u64,
    mut sim: turmoil::Sim<'static>,
    seats: &[Arc<Seat>],
    writers: &[Arc<Writer>],
    victim: usize,
    id: Option<MemberId>,
) -> Outcome {
    let after = seats[1].rec().messages().len();
    step_until(&mut sim, "200 payloads applied while the follower is down", || {
        seats[1].rec().messages().len() >= after + 200
    });
    sim.bounce(HOSTS[victim]);
    step_until(&mut sim, "the follower started again", || seats[victim].starts.load(Ordering::SeqCst) == 2);
    assert_eq!(*seats[victim].id.lock().unwrap(), id, "seed {seed}: the follower came back as itself");
    let after = seats[victim].rec().messages().len();
    step_until(&mut sim, "200 payloads applied by the follower since its start", || {
        seats[victim].rec().messages().len() >= after + 200
    });
    end_of_run(seed, &mut sim, seats, writers, Promise::EveryPayloadOnce)
}

/// With every log purged under load (64 KiB each), n3, a follower without
/// the writer, is cut off from both others while n2 writes 3,000 payloads,
/// so that the others' logs no longer hold what it missed: once the links
/// mend it is taken back by a snapshot of the group state (Raft's
/// InstallSnapshot), which it must keep on its disk. Killed with -9 next,
/// it comes back from that disk as itself and catches up again; in the
/// end all three applied one history, every payload once.
pub(super) fn follower_behind_the_purge(seed: u64) -> Outcome {
    let (mut sim, seats, writers) = start_three_with(seed, false, false, true);
    let victim = 2;
    assert_ne!(leader_seat(&seats), victim, "seed {seed}: n3 follows");
    for other in [HOSTS[0], HOSTS[1]] {
        sim.partition(HOSTS[victim], other);
    }
    let after = seats[1].rec().messages().len();
    step_until(&mut sim, "3000 payloads applied while n3 is cut off", || {
        seats[1].rec().messages().len() >= after + 3000
    });
    for other in [HOSTS[0], HOSTS[1]] {
        sim.repair(HOSTS[victim], other);
    }
    step_until(&mut sim, "n3 restored a snapshot", || seats[victim].rec().journal().restores > 0);
    let after = seats[victim].rec().messages().len();
    step_until(&mut sim, "200 payloads applied by n3 since its snapshot", || {
        seats[victim].rec().messages().len() >= after + 200
    });
    let id = kill(&mut sim, &seats, victim);
    follower_back(seed, sim, &seats, &writers, victim, id)
}

#[test]
fn a_follower_behind_the_purge_comes_back_by_snapshot_under_simulation() {
    run_seeds(follower_behind_the_purge);
}

#[test]
fn a_follower_killed_under_load_comes_back_as_itself_under_simulation() {
    run_seeds(follower_killed_under_load);
}

#[test]
fn a_follower_that_lost_power_under_load_comes_back_as_itself_under_simulation() {
    run_seeds(follower_lost_power_under_load);
}

/// The leader is killed with -9 while n2 writes, and starts again once the
/// two others ordered 200 payloads under a leader of their own. It comes
/// back as itself, as a follower, and in the end all three applied the
/// same history, in which the writer's payloads rise, each at most once
/// (what n2 had forwarded to the dead leader may be lost).
pub(super) fn leader_killed_under_load(seed: u64) -> Outcome {
    let (mut sim, seats, writers) = three_writing(seed);
    let leader = leader_seat(&seats);
    let id = kill(&mut sim, &seats, leader);
    let others: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    let after = seats[others[0]].rec().messages().len();
    step_until(&mut sim, "200 payloads applied by the two others", || {
        others.iter().all(|&o| seats[o].rec().messages().len() >= after + 200)
    });
    sim.bounce(HOSTS[leader]);
    step_until(&mut sim, "the old leader started again", || seats[leader].starts.load(Ordering::SeqCst) == 2);
    assert_eq!(*seats[leader].id.lock().unwrap(), id, "seed {seed}: the old leader came back as itself");
    end_of_run(seed, &mut sim, &seats, &writers, Promise::Rising)
}

/// Every member is killed with -9 at once while n2 writes (a power cut of
/// the whole site, on disks that kept every write), and after a second all
/// start again from their disks. They form the group again as themselves,
/// with no bootstrap, and go on. What n2 applied before the crash was
/// ordered, so it is on a majority's logs: it must begin every history
/// after the restart. The writer's payloads rise, each at most once (those
/// in flight at the crash may be lost).
pub(super) fn group_crashed_under_load(seed: u64) -> Outcome {
    let (mut sim, seats, writers) = three_writing(seed);
    let ids: Vec<Option<MemberId>> = (0..3).map(|i| kill(&mut sim, &seats, i)).collect();
    group_back_whole(seed, sim, &seats, &writers, ids)
}

/// As [`group_crashed_under_load`], with `gcache.fsync` on and a power
/// cut: what each member wrote since its last fsync is torn at a point the
/// seed draws, per file. An append is acknowledged only once fsynced, so
/// what n2 applied is still on a majority's disks, and must begin every
/// history after the restart.
pub(super) fn group_lost_power_under_load(seed: u64) -> Outcome {
    let (mut sim, seats, writers) = start_three(seed, false, true);
    let mut draw = sim_disk::tear_draws(seed);
    let cut: Vec<(Option<MemberId>, u64)> = (0..3).map(|i| power_loss(&mut sim, &seats, i, &mut draw)).collect();
    let torn: Vec<u64> = cut.iter().map(|(_, t)| *t).collect();
    eprintln!("seed {seed}: the power cut tore {torn:?} bytes of writes not yet fsynced");
    group_back_whole(seed, sim, &seats, &writers, cut.into_iter().map(|(id, _)| id).collect())
}

/// Starts all three again a second after they went down together, and
/// checks that they came back as themselves and that what n2 applied
/// before begins every history after.
fn group_back_whole(
    seed: u64,
    mut sim: turmoil::Sim<'static>,
    seats: &[Arc<Seat>],
    writers: &[Arc<Writer>],
    ids: Vec<Option<MemberId>>,
) -> Outcome {
    let applied_before = per_writer(&seats[1].rec()).remove(&0).unwrap_or_default();
    step_for(&mut sim, Duration::from_secs(1));
    for name in HOSTS {
        sim.bounce(name);
    }
    step_until(&mut sim, "all three started again", || seats.iter().all(|s| s.starts.load(Ordering::SeqCst) == 2));
    for (i, s) in seats.iter().enumerate() {
        assert_eq!(*s.id.lock().unwrap(), ids[i], "seed {seed}: member {i} came back as itself");
    }
    step_until(&mut sim, "200 payloads more applied by all three", || {
        seats.iter().all(|s| s.rec().messages().len() >= applied_before.len() + 200)
    });
    let outcome = end_of_run(seed, &mut sim, seats, writers, Promise::Rising);
    for (i, s) in seats.iter().enumerate() {
        let seen = per_writer(&s.rec())[&0].clone();
        assert!(
            seen.starts_with(&applied_before),
            "seed {seed}, member {i}: the {} payloads n2 applied before the crash begin its history",
            applied_before.len()
        );
    }
    outcome
}

#[test]
fn a_whole_group_crashed_under_load_comes_back_whole_under_simulation() {
    run_seeds(group_crashed_under_load);
}

#[test]
fn a_whole_group_that_lost_power_under_load_comes_back_whole_under_simulation() {
    run_seeds(group_lost_power_under_load);
}

#[test]
fn a_leader_killed_under_load_comes_back_as_a_follower_under_simulation() {
    run_seeds(leader_killed_under_load);
}
