//! `pc.weight`: Galera's weighted quorum on top of Raft's head count.
//! A heavy member cut from two light ones goes on alone; the two light
//! ones, a majority of heads, stay non-primary and commit nothing, then
//! rejoin the heavy one's history. Waits only bound a hung test; no
//! assertion depends on timing.

mod common;

use common::*;
use tandem_group::{GroupChannel, GroupError, Isolation};

fn msg(n: usize) -> Vec<u8> {
    format!("w{n}").into_bytes()
}

fn weight_everywhere(members: &[&Member], weight: u64) -> bool {
    members.iter().all(|m| m.group.cluster_weight() == Some(weight))
}

#[test]
fn a_weight_change_is_agreed_by_every_member_before_set_returns_on_the_leader() {
    let _serial = serial();
    let members = three_voters(["c1", "c2", "c3"]);
    let all: Vec<&Member> = members.iter().collect();
    assert_eq!(members[0].group.cluster_weight(), Some(3));
    // Set on a follower: it goes through the leader.
    members[1].group.set_weight(4).expect("set on a follower");
    assert_eq!(members[1].group.cluster_weight(), Some(6), "the membership carries it when set returns");
    wait_until("every member weighs the group at 6", || weight_everywhere(&all, 6));
    assert!(matches!(members[0].group.set_weight(256), Err(GroupError::Config(_))));
    members[1].group.set_weight(1).expect("back to 1");
    wait_until("every member weighs the group at 3", || weight_everywhere(&all, 3));
    let view = members[0].rec.last_view().expect("a view");
    assert_eq!(view.voters.len(), 3, "weights change no member's role");
}

#[test]
fn a_heavy_member_cut_from_two_light_ones_goes_on_alone_and_they_wait_for_it() {
    let _serial = serial();
    let members = three_voters(["h1", "h2", "h3"]);
    let (m1, m2, m3) = (&members[0], &members[1], &members[2]);
    m1.group.set_weight(3).expect("weigh 3");
    assert_eq!(m1.group.cluster_weight(), Some(5));
    wait_until("the light members know h1 weighs 3", || weight_everywhere(&[m2, m3], 5));
    submit(m2, &msg(0));
    wait_delivered(&[m1, m2, m3], &msg(0));
    let light_before = m2.rec.events();

    // galera_pc_weight's shape: 3 against 1 + 1.
    m1.group.isolate(Isolation::Isolated).expect("isolate");
    wait_until("h2 and h3 are told they are non-primary", || told_non_primary(m2) && told_non_primary(m3));
    wait_until("h1 forms a primary component alone", || {
        m1.rec.last_view().is_some_and(|v| v.voters == vec![m1.id()] && v.members.len() == 1)
            && m1.group.status().primary
    });
    assert!(logged(&["Weighted quorum (pc.weight) holds"]));
    for i in 1..=10 {
        submit(m1, &msg(i));
    }
    wait_delivered(&[m1], &msg(10));
    for m in [m2, m3] {
        assert!(!m.group.status().primary, "{} is on the light side", m.name);
        assert_eq!(m.group.submit(b"light side".to_vec()), Err(GroupError::NonPrimary));
    }
    // Two heads of three, but not enough weight: they ordered nothing, not
    // even the removal of h1 (an eviction needs the primary component).
    assert_eq!(m2.rec.events(), light_before, "h2 applied nothing while cut");
    assert_eq!(m3.rec.events(), light_before, "h3 applied nothing while cut");

    m1.group.set_weight(1).expect("weigh 1, alone");
    assert_eq!(m1.group.cluster_weight(), Some(1));

    m1.group.isolate(Isolation::Off).expect("back");
    wait_until("h2 and h3 are members of h1's group again", || {
        [m1, m2, m3].iter().all(|m| m.rec.last_view().is_some_and(|v| v.contains(m2.id()) && v.contains(m3.id())))
    });
    wait_primary(m2);
    wait_primary(m3);
    wait_delivered(&[m2, m3], &msg(10));
    m2.group.promote(m2.id()).expect("promote h2");
    m3.group.promote(m3.id()).expect("promote h3");
    submit(m3, &msg(11));
    wait_delivered(&[m1, m2, m3], &msg(11));
    let history = same_history(&[m1, m2, m3]);
    let delivered: Vec<usize> = (0..=11)
        .map(|i| history.iter().filter(|e| matches!(e, Event::Message { payload, .. } if *payload == msg(i))).count())
        .collect();
    assert_eq!(delivered, vec![1; 12], "each write once, in one history");
    wait_until("the group weighs 3 again everywhere", || weight_everywhere(&[m1, m2, m3], 3));
}

#[test]
fn with_equal_weights_a_single_member_does_not_go_on() {
    let _serial = serial();
    let members = three_voters(["e1", "e2", "e3"]);
    let (m1, m2, m3) = (&members[0], &members[1], &members[2]);
    let weighted = count_logged(&["Weighted quorum (pc.weight) holds"]);
    m1.group.isolate(Isolation::Isolated).expect("isolate");
    wait_until("e1 is told it is non-primary", || told_non_primary(m1));
    wait_until("e2 and e3 go on without e1", || {
        [m2, m3].iter().all(|m| m.rec.last_view().is_some_and(|v| !v.contains(m1.id())))
    });
    assert!(!m1.group.status().primary);
    assert_eq!(m1.group.submit(b"alone".to_vec()), Err(GroupError::NonPrimary));
    assert_eq!(count_logged(&["Weighted quorum (pc.weight) holds"]), weighted);
}
