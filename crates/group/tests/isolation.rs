//! `gmcast.isolate` and the way back: an isolated member leaves the
//! primary component and the others go on; set back to 0 it returns, by
//! Raft's own catch-up when the group still has it, or by asking to be
//! taken back when the group removed it meanwhile. Waits only bound a hung
//! test; no assertion depends on timing.

mod common;

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

use common::*;
use tandem_group::{GroupChannel, GroupError, Isolation};

fn msg(n: usize) -> Vec<u8> {
    format!("w{n}").into_bytes()
}

/// Whether the listener closes a new connection without a word.
fn closed_at_once(m: &Member) -> bool {
    let mut s = TcpStream::connect(m.group.local_addr()).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    matches!(s.read_to_end(&mut got), Ok(0))
}

#[test]
fn an_isolated_member_of_two_leaves_the_primary_component_and_both_come_back_unchanged() {
    let _serial = serial();
    // Two voters: neither side of the cut holds a majority, so nobody is
    // evicted and the membership never changes (MariaDB's MW-284 shape).
    let m1 = bootstrap("i1");
    wait_primary(&m1);
    let m2 = join("i2", &m1);
    wait_primary(&m2);
    m2.group.promote(m2.id()).expect("promote");
    wait_until("two voters", || m1.rec.last_view().is_some_and(|v| v.voters.len() == 2));
    submit(&m1, &msg(0));
    wait_delivered(&[&m1, &m2], &msg(0));
    let views_before = m1.rec.events().iter().filter(|e| matches!(e, Event::View(_))).count();

    m2.group.isolate(Isolation::Isolated).expect("isolate");
    wait_until("both are told they are non-primary", || told_non_primary(&m1) && told_non_primary(&m2));
    assert_eq!(m2.group.submit(b"while isolated".to_vec()), Err(GroupError::NonPrimary));
    assert!(closed_at_once(&m2), "an isolated member answers nobody");

    m2.group.isolate(Isolation::Off).expect("back");
    wait_primary(&m1);
    wait_primary(&m2);
    submit(&m2, &msg(1));
    wait_delivered(&[&m1, &m2], &msg(1));
    let history = same_history(&[&m1, &m2]);
    let views_after = history.iter().filter(|e| matches!(e, Event::View(_))).count();
    assert_eq!(views_after, views_before, "no membership change");
}

#[test]
fn an_isolated_leader_is_removed_then_taken_back_without_a_restart() {
    let _serial = serial();
    let members = three_voters(["r1", "r2", "r3"]);
    let (m1, m2, m3) = (&members[0], &members[1], &members[2]);
    assert_eq!(m1.group.status().leader, Some(m1.id()), "r1 bootstrapped and leads");
    submit(m2, &msg(0));
    wait_delivered(&[m1, m2, m3], &msg(0));

    // r1 leads and was bootstrapped with no peer address: it finds its way
    // back only through the members it knew.
    m1.group.isolate(Isolation::Isolated).expect("isolate");
    wait_until("r1 is told it is non-primary", || told_non_primary(m1));
    wait_until("r2 and r3 remove r1", || {
        [m2, m3].iter().all(|m| m.rec.last_view().is_some_and(|v| !v.contains(m1.id())))
    });
    for i in 1..20 {
        submit(m2, &msg(i));
    }
    wait_delivered(&[m2, m3], &msg(19));

    m1.group.isolate(Isolation::Off).expect("back");
    wait_until("r1 is a member again, everywhere", || {
        [m1, m2, m3].iter().all(|m| m.rec.last_view().is_some_and(|v| v.contains(m1.id())))
    });
    wait_primary(m1);
    wait_delivered(&[m1], &msg(19));
    m1.group.promote(m1.id()).expect("promote after rejoining");
    submit(m1, &msg(20));
    wait_delivered(&[m1, m2, m3], &msg(20));
    let history = same_history(&[m1, m2, m3]);
    let rejoined = history
        .iter()
        .filter_map(|e| match e {
            Event::View(v) => Some(v.contains(m1.id())),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert!(
        rejoined.windows(2).any(|w| w == [false, true]),
        "the history shows r1 removed, then taken back: {rejoined:?}"
    );
    assert!(logged(&["asking to be taken back"]));
}

#[test]
fn a_terminated_group_connection_stays_terminated() {
    let _serial = serial();
    let m1 = bootstrap("t1");
    wait_primary(&m1);
    let m2 = join("t2", &m1);
    wait_primary(&m2);
    m2.group.isolate(Isolation::Terminated).expect("terminate");
    assert!(logged(&["gmcast.isolate=2"]));
    let undo = m2.group.isolate(Isolation::Off);
    assert!(matches!(&undo, Err(GroupError::Config(why)) if why.contains("restart")), "{undo:?}");
    wait_until("t2 is told it is non-primary", || told_non_primary(&m2));
    assert!(closed_at_once(&m2));
}
