//! Members with durable state (identity, vote, log, checkpoints in a
//! directory): a restarted member comes back as itself and catches up from
//! its own log and the group's; a whole group restarted without bootstrap
//! forms again by itself; a minority waits and says who is missing; an
//! explicit bootstrap from durable state keeps the history.

mod common;

use std::path::PathBuf;

use common::*;
use tandem_group::{Connectivity, GroupChannel, GroupConfig, LogSettings, PartitionPolicy};

/// Where one member lives: a fixed port (an identity is bound to its
/// address) and a state directory that outlives its processes.
struct Seat {
    name: &'static str,
    port: u16,
    dir: PathBuf,
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().unwrap().port()
}

fn seats(root: &tempfile::TempDir, names: &[&'static str]) -> Vec<Seat> {
    names.iter().map(|&name| Seat { name, port: free_port(), dir: root.path().join(name) }).collect()
}

fn addr(s: &Seat) -> String {
    format!("127.0.0.1:{}", s.port)
}

fn durable(seat: &Seat, bootstrap: bool, all: &[Seat]) -> GroupConfig {
    let peers = all.iter().map(addr).collect();
    let mut c = config(seat.name, CLUSTER, bootstrap, peers);
    c.listen_addr = addr(seat);
    c.log = LogSettings { dir: Some(seat.dir.clone()), ..LogSettings::default() };
    c
}

/// Three durable voters, with `writes` messages ordered.
fn three_durable_voters(all: &[Seat], writes: usize) -> Vec<Member> {
    durable_voters(all, writes)
}

/// As many durable voters as seats, with `writes` messages ordered.
fn durable_voters(all: &[Seat], writes: usize) -> Vec<Member> {
    let first = start(durable(&all[0], true, all));
    wait_primary(&first);
    let mut members = vec![first];
    for seat in &all[1..] {
        let m = start(durable(seat, false, all));
        wait_primary(&m);
        m.group.promote(m.id()).expect("promote");
        members.push(m);
    }
    wait_until("all voters", || members[0].rec.last_view().is_some_and(|v| v.voters.len() == all.len()));
    for i in 0..writes {
        submit(&members[0], &msg(i));
    }
    let refs: Vec<&Member> = members.iter().collect();
    wait_delivered(&refs, &msg(writes - 1));
    members
}

fn msg(i: usize) -> Vec<u8> {
    format!("write {i}").into_bytes()
}

/// Stops a member as a crash does: no graceful leave.
fn crash(m: Member) -> u64 {
    let id = m.id();
    m.group.shutdown();
    id
}

#[test]
fn a_restarted_member_comes_back_as_itself_and_catches_up() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let all = seats(&root, &["d1", "d2", "d3"]);
    let mut members = three_durable_voters(&all, 20);
    let old_id = crash(members.pop().unwrap());
    for i in 20..50 {
        submit(&members[0], &msg(i));
    }
    wait_delivered(&[&members[0], &members[1]], &msg(49));
    let back = start(durable(&all[2], false, &all));
    assert_eq!(back.id(), old_id, "the same member, not a new one");
    wait_primary(&back);
    wait_delivered(&[&back], &msg(49));
    let history = same_history(&[&members[0], &back]);
    assert!(history.contains(&Event::Message { origin: members[0].id(), payload: msg(0) }));
}

#[test]
fn a_whole_group_restarted_without_bootstrap_forms_again_by_itself() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let all = seats(&root, &["w1", "w2", "w3"]);
    let members = three_durable_voters(&all, 10);
    let ids: Vec<u64> = members.into_iter().map(crash).collect();
    // Every member restarts as configured before: nobody bootstraps.
    let back: Vec<Member> = all.iter().map(|s| start(durable(s, false, &all))).collect();
    assert_eq!(back.iter().map(|m| m.id()).collect::<Vec<_>>(), ids);
    for m in &back {
        wait_primary(m);
    }
    submit(&back[1], b"after the restart");
    wait_delivered(&[&back[0], &back[1], &back[2]], b"after the restart");
    let history = same_history(&[&back[0], &back[1], &back[2]]);
    assert!(history.contains(&Event::Message { origin: ids[0], payload: msg(9) }), "nothing ordered was lost");
}

#[test]
fn a_minority_waits_and_names_the_missing_members() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let all = seats(&root, &["q1", "q2", "q3"]);
    let members = three_durable_voters(&all, 3);
    members.into_iter().for_each(|m| {
        crash(m);
    });
    let alone = start(durable(&all[0], false, &all));
    wait_until("the wait is reported", || {
        logged(&["Waiting for the primary component", "1 of the 3 voters", "q2", "q3", "pc.bootstrap=YES"])
    });
    assert!(!alone.group.status().primary, "one of three is not a majority");
    // A second member back makes a majority: it forms by itself.
    let second = start(durable(&all[1], false, &all));
    wait_primary(&alone);
    wait_primary(&second);
}

#[test]
fn bootstrapping_from_durable_state_keeps_the_history_and_this_member_alone() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let all = seats(&root, &["b1", "b2", "b3"]);
    let members = three_durable_voters(&all, 5);
    let ids: Vec<u64> = members.into_iter().map(crash).collect();
    let alone = start(durable(&all[1], true, &all));
    wait_primary(&alone);
    assert_eq!(alone.id(), ids[1]);
    assert_eq!(alone.group.membership().voters, vec![ids[1]], "the only voter");
    submit(&alone, b"on its own");
    wait_delivered(&[&alone], b"on its own");
    assert!(alone.rec.has_message(&msg(4)), "the history before is kept");
    // The others come back and join it.
    let other = start(durable(&all[2], false, &all));
    wait_primary(&other);
    wait_delivered(&[&other], b"on its own");
}

#[test]
fn pc_bootstrap_re_forms_the_group_around_a_lone_member_and_keeps_its_history() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let all = seats(&root, &["p1", "p2", "p3"]);
    let ids: Vec<u64> = three_durable_voters(&all, 4).into_iter().map(crash).collect();
    let alone = start(durable(&all[0], false, &all));
    wait_until("it waits for a majority", || logged(&["Waiting for the primary component", "p2"]));
    assert!(!alone.group.status().primary);
    alone.group.bootstrap().expect("pc.bootstrap");
    wait_primary(&alone);
    assert_eq!(alone.group.membership().voters, vec![ids[0]]);
    submit(&alone, b"after pc.bootstrap");
    wait_delivered(&[&alone], b"after pc.bootstrap");
    assert!(alone.rec.has_message(&msg(3)), "the history before is kept");
    let back = start(durable(&all[1], false, &all));
    wait_primary(&back);
    wait_delivered(&[&back], b"after pc.bootstrap");
}

#[test]
fn pc_bootstrap_refuses_a_member_behind_one_it_can_reach() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let all = seats(&root, &["r1", "r2", "r3", "r4", "r5"]);
    let mut members = durable_voters(&all, 2);
    // r5 stops first: the others order more without it.
    let behind = crash(members.pop().unwrap());
    for i in 2..6 {
        submit(&members[0], &msg(i));
    }
    wait_delivered(&[&members[1]], &msg(5));
    members.into_iter().for_each(|m| {
        crash(m);
    });
    // Two of five come back: no majority. r5 is behind r2.
    let r5 = start(durable(&all[4], false, &all));
    let r2 = start(durable(&all[1], false, &all));
    assert_eq!(r5.id(), behind);
    let refused = r5.group.bootstrap().expect_err("r2 is more advanced");
    assert!(refused.to_string().contains("more advanced"), "{refused}");
    assert!(!r5.group.status().primary);
    r2.group.bootstrap().expect("the most advanced may bootstrap");
    wait_primary(&r2);
    wait_primary(&r5);
    wait_delivered(&[&r5], &msg(5));
}

#[test]
fn in_fsync_mode_a_member_orders_restarts_as_itself_and_leaves_no_thread() {
    let _serial = serial();
    wait_until("threads of earlier tests gone", || group_threads() == 0);
    let root = tempfile::tempdir().unwrap();
    let all = seats(&root, &["f1"]);
    let fsync = |seat: &Seat| {
        let mut c = durable(seat, true, &all);
        c.log.fsync = true;
        c
    };
    let m = start(fsync(&all[0]));
    wait_primary(&m);
    assert!(group_threads() >= 3, "two workers and the flusher");
    for i in 0..50 {
        submit(&m, &msg(i));
    }
    wait_delivered(&[&m], &msg(49));
    let id = crash(m);
    wait_until("no tandem-group-* thread left, the flusher included", || group_threads() == 0);
    let back = start(fsync(&all[0]));
    assert_eq!(back.id(), id);
    wait_primary(&back);
    submit(&back, b"again");
    wait_delivered(&[&back], b"again");
    assert!(back.rec.has_message(&msg(49)));
}

// ---- pc.ignore_sb / pc.ignore_quorum ---------------------------------------

const IGNORE_SB: PartitionPolicy = PartitionPolicy { ignore_split_brain: true, ignore_quorum: false };
const IGNORE_QUORUM: PartitionPolicy = PartitionPolicy { ignore_split_brain: false, ignore_quorum: true };

fn non_primary_reports(m: &Member) -> usize {
    m.rec.connectivity().iter().filter(|c| matches!(c, Connectivity::NonPrimary { .. })).count()
}

/// Durable voters, one for each seat, all with `pc.ignore_sb`, after
/// `writes` messages.
fn ignore_sb_voters(all: &[Seat], writes: usize) -> Vec<Member> {
    let members = durable_voters(all, writes);
    for m in &members {
        m.group.set_partition_policy(IGNORE_SB);
    }
    members
}

/// A 2-node cluster with `pc.ignore_sb` loses one node: the other keeps
/// serving without ever being non-primary (Galera delivers it a primary
/// view of one), whichever of the two led. The lost one rejoins it.
#[test]
fn ignore_sb_keeps_the_survivor_of_two_primary_whichever_one_led() {
    let _serial = serial();
    for crash_leader in [false, true] {
        let root = tempfile::tempdir().unwrap();
        let all = seats(&root, &["s1", "s2"]);
        let mut members = ignore_sb_voters(&all, 5);
        let before: Vec<usize> = members.iter().map(non_primary_reports).collect();
        let gone = if crash_leader { 0 } else { 1 };
        let crashed = crash(members.remove(gone));
        let survivor = &members[0];
        wait_until("the survivor is the only voter", || survivor.group.membership().voters == vec![survivor.id()]);
        wait_primary(survivor);
        submit(survivor, b"alone");
        wait_delivered(&[survivor], b"alone");
        assert_eq!(
            non_primary_reports(survivor),
            before[1 - gone],
            "the survivor was never told it lost the primary component (leader crashed: {crash_leader})"
        );
        assert!(survivor.rec.has_message(&msg(4)), "the history before is kept");
        assert!(logged(&["Ignoring possible split-brain"]));
        let back = start(durable(&all[gone], false, &all));
        assert_eq!(back.id(), crashed);
        wait_primary(&back);
        wait_delivered(&[&back], b"alone");
    }
}

/// A causal read begun on the survivor of two right after its peer crashed
/// waits through the re-forming and then succeeds, as a Galera causal read
/// does once the view without the lost node is installed. It used to fail:
/// the read-index round on the Raft instance being replaced never answered,
/// and between two leaders "no leader" read as a lost primary component
/// (MTR galera_kill_smallchanges: an INSERT failed with 1205).
#[test]
fn ignore_sb_a_causal_read_across_the_re_forming_succeeds() {
    let _serial = serial();
    for crash_leader in [false, true] {
        let root = tempfile::tempdir().unwrap();
        let all = seats(&root, &["s1", "s2"]);
        let mut members = ignore_sb_voters(&all, 3);
        let gone = if crash_leader { 0 } else { 1 };
        crash(members.remove(gone));
        let survivor = &members[0];
        let read = survivor.group.read_barrier(PATIENCE);
        assert!(read.is_ok(), "the causal read waits for the new component (leader crashed: {crash_leader}): {read:?}");
        wait_until("the survivor is the only voter", || survivor.group.membership().voters == vec![survivor.id()]);
        assert!(survivor.rec.has_message(&msg(2)), "the history before is kept");
    }
}

/// `pc.ignore_sb` is about exactly half: one of three alone still waits for
/// a majority. `pc.ignore_quorum` lets it go on.
#[test]
fn ignore_sb_leaves_a_minority_waiting_and_ignore_quorum_does_not() {
    let _serial = serial();
    for (policy, goes_on) in [(IGNORE_SB, false), (IGNORE_QUORUM, true)] {
        let root = tempfile::tempdir().unwrap();
        let all = seats(&root, &["m1", "m2", "m3"]);
        let mut members = three_durable_voters(&all, 3);
        members[0].group.set_partition_policy(policy);
        let before = non_primary_reports(&members[0]);
        crash(members.pop().unwrap());
        crash(members.pop().unwrap());
        let alone = &members[0];
        if goes_on {
            wait_until("a component of one", || alone.group.membership().voters == vec![alone.id()]);
            wait_primary(alone);
            submit(alone, b"a minority with ignore_quorum");
            wait_delivered(&[alone], b"a minority with ignore_quorum");
            assert_eq!(non_primary_reports(alone), before);
        } else {
            wait_until("the minority is non-primary", || non_primary_reports(alone) > before);
            assert!(!alone.group.status().primary);
            assert_eq!(alone.group.membership().voters.len(), 3);
        }
    }
}

/// Four voters split 2+2 (two crash): with `pc.ignore_sb` the two left form
/// a component of both, around the more advanced log, and both take
/// writes.
#[test]
fn ignore_sb_lets_half_of_four_go_on_together() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let all = seats(&root, &["h1", "h2", "h3", "h4"]);
    let mut members = ignore_sb_voters(&all, 4);
    // The leader goes: the survivors must elect within the new component.
    crash(members.remove(0));
    crash(members.remove(0));
    let ids: Vec<u64> = {
        let mut ids: Vec<u64> = members.iter().map(Member::id).collect();
        ids.sort_unstable();
        ids
    };
    for m in &members {
        wait_until("a component of the two left", || m.group.membership().voters == ids && m.group.status().primary);
    }
    submit(&members[0], b"from h3");
    submit(&members[1], b"from h4");
    let refs: Vec<&Member> = members.iter().collect();
    wait_delivered(&refs, b"from h3");
    wait_delivered(&refs, b"from h4");
    same_history(&refs);
}

/// The cluster moved on while a member was away: its peers were restarted
/// as a new group (a node bootstrapped a new history, as Galera does from
/// data with no saved position). The member's durable state belongs to the
/// old group and can never rejoin this one. Already running, it is refused
/// with what to do, and the new group never takes it in (it would evict the
/// silent member over and over); restarted, it sets the state aside and
/// joins the new group as a new member.
#[test]
fn a_member_whose_cluster_moved_on_to_a_new_history_joins_it_anew_after_a_restart() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let all = seats(&root, &["h1", "h2"]);
    let (old_history, new_history) = ([1u8; 16], [2u8; 16]);
    let members = durable_voters(&all, 3);
    // The engine announces the group uuid of each primary view.
    members.iter().for_each(|m| m.group.announce_group(Some(old_history)));
    let old_ids: Vec<u64> = members.into_iter().map(crash).collect();

    // No history from the local data (as with grastate.dat removed): the
    // group recorded beside the state when it was announced decides.
    let restored = || durable(&all[1], false, &all);
    let waiting = start(restored());
    assert_eq!(waiting.id(), old_ids[1], "restored as itself: its peer is not up yet");
    let mut anew = durable(&all[0], true, &all);
    anew.start_anew = Some("a new history".into());
    let founder = start(anew);
    wait_primary(&founder);
    founder.group.announce_group(Some(new_history));
    assert_ne!(founder.id(), old_ids[0]);

    wait_until("the refusal is logged", || logged(&["Cannot rejoin", "Restart this node"]));
    // Its join loop asks again within two seconds: none gets it taken in.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let seen_by_founder = founder.rec.views();
    assert!(
        seen_by_founder.iter().all(|v| !v.contains(old_ids[1])),
        "the new group never admits the old group's member: {seen_by_founder:?}"
    );
    assert!(!waiting.group.status().primary);

    crash(waiting);
    let back = start(restored());
    assert_ne!(back.id(), old_ids[1], "its old state was set aside: a new member");
    wait_primary(&back);
    wait_until("the founder sees the new member", || founder.rec.last_view().is_some_and(|v| v.contains(back.id())));
    submit(&founder, b"in the new history");
    wait_delivered(&[&back], b"in the new history");
}

/// The probe asks each peer with a deadline of its own: a peer that takes
/// the connection and never answers (a hung process, a port some other
/// program holds) must not hide the answer of one live in a new history.
/// With one deadline around all the answers, the hung peer made the member
/// open its old state, which the new group then refused for good.
#[test]
fn a_peer_that_never_answers_does_not_hide_one_that_moved_on() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let all = seats(&root, &["m1", "m2"]);
    let members = durable_voters(&all, 3);
    members.iter().for_each(|m| m.group.announce_group(Some([5u8; 16])));
    let old_ids: Vec<u64> = members.into_iter().map(crash).collect();

    let mut anew = durable(&all[0], true, &all);
    anew.start_anew = Some("a new history".into());
    let founder = start(anew);
    wait_primary(&founder);
    founder.group.announce_group(Some([6u8; 16]));

    // Takes connections (the kernel completes them) and never says a word.
    let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut restored = durable(&all[1], false, &all);
    restored.peers.insert(0, hung.local_addr().unwrap().to_string());
    let back = start(restored);
    assert_ne!(back.id(), old_ids[1], "the founder's answer set the old state aside");
    wait_primary(&back);
    submit(&founder, b"past the hung peer");
    wait_delivered(&[&back], b"past the hung peer");
    drop(hung);
}

/// A member restarted into the group its state belongs to is not moved:
/// the probe of its peers finds them live in that same group.
#[test]
fn a_member_restarted_into_its_own_live_group_keeps_its_state() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let all = seats(&root, &["k1", "k2", "k3"]);
    let history = [3u8; 16];
    let mut members = three_durable_voters(&all, 3);
    members.iter().for_each(|m| m.group.announce_group(Some(history)));
    let old_id = crash(members.pop().unwrap());
    let mut c = durable(&all[2], false, &all);
    c.history = Some(history);
    let back = start(c);
    assert_eq!(back.id(), old_id, "the same member, not a new one");
    wait_primary(&back);
}

/// A member cut off under `pc.ignore_quorum` forms a primary component of
/// its own, alone, while the others go on as the group, under the same
/// group uuid. Restarted with that state, it used to elect itself at once
/// (its only voter) and order a private history beside the group's (MTR
/// galera_allowlist: a node restarted into a component of one). Now its
/// state says it was the only voter, its peers are live in its group, so it
/// sets the state aside and joins their component as a new member.
#[test]
fn a_member_that_formed_a_component_alone_joins_the_group_after_a_restart() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let all = seats(&root, &["f1", "f2", "f3"]);
    let history = [7u8; 16];
    let mut members = three_durable_voters(&all, 3);
    members.iter().for_each(|m| m.group.announce_group(Some(history)));
    let cut = members.pop().unwrap();
    cut.group.set_partition_policy(IGNORE_QUORUM);
    cut.group.isolate(tandem_group::Isolation::Isolated).expect("isolate");
    wait_until("a component of one", || cut.group.membership().voters == vec![cut.id()] && cut.group.status().primary);
    cut.group.announce_group(Some(history));
    submit(&members[0], b"the group goes on");
    wait_delivered(&[&members[0], &members[1]], b"the group goes on");
    let old_id = crash(cut);

    let mut c = durable(&all[2], false, &all);
    c.history = Some(history);
    let back = start(c);
    assert_ne!(back.id(), old_id, "its state of a component of its own was set aside: a new member");
    assert!(logged(&["the group went on without this member"]));
    wait_primary(&back);
    wait_until("the group sees the new member", || members[0].rec.last_view().is_some_and(|v| v.contains(back.id())));
    submit(&members[0], b"one history");
    wait_delivered(&[&back], b"one history");
    assert!(
        back.group.membership().voters.contains(&members[0].id()),
        "it is in the group's component, not one of its own"
    );
}
