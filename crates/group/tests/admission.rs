//! Who may connect beyond the cluster name: the server's allowlist
//! (`wsrep_allowlist`) and, once a member is in a live group, that group's
//! uuid. A refused peer is told why, both sides log it, and the group keeps
//! working.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use tandem_group::wire::{self, Hello, PROTOCOL_VERSION};
use tandem_group::{Admission, GroupChannel, MemberInfo};

/// Sends a handshake with this group uuid; returns everything the listener
/// answered before it closed or went quiet.
fn hello_with_group(m: &Member, group: Option<[u8; 16]>) -> Vec<u8> {
    let mut s = TcpStream::connect(m.group.local_addr()).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let hello = Hello {
        cluster: CLUSTER.into(),
        member: 777,
        info: MemberInfo { name: "prober".into(), ..Default::default() },
        group,
    };
    s.write_all(b"TNDM").unwrap();
    s.write_all(&PROTOCOL_VERSION.to_be_bytes()).unwrap();
    s.write_all(&wire::encode_frame(&hello).unwrap()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    got
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn a_member_of_another_live_group_is_refused_and_a_groupless_one_is_not() {
    let _serial = serial();
    let m1 = bootstrap("g1");
    wait_primary(&m1);
    m1.group.announce_group(Some([1; 16]));

    let refused = hello_with_group(&m1, Some([2; 16]));
    assert!(contains(&refused, "group mismatch"), "told why: {refused:?}");
    wait_until("the group mismatch logged", || logged(&["Refusing member 777", "02020202-0202", "01010101-0101"]));

    let accepted = hello_with_group(&m1, None);
    assert!(!contains(&accepted, "mismatch"), "a member in no group yet may join");
    let same = hello_with_group(&m1, Some([1; 16]));
    assert!(!contains(&same, "mismatch"), "nor a member of this group");

    // Once m1 is in no live group (non-primary), it checks nothing.
    m1.group.announce_group(None);
    let later = hello_with_group(&m1, Some([2; 16]));
    assert!(!contains(&later, "mismatch"), "{later:?}");

    let m2 = join("g2", &m1);
    wait_primary(&m2);
    submit(&m2, b"after-the-probes");
    wait_delivered(&[&m1, &m2], b"after-the-probes");
    m2.group.shutdown();
    m1.group.shutdown();
}

#[test]
fn an_address_outside_the_allowlist_is_refused_with_a_line_on_both_sides() {
    let _serial = serial();
    let asked = Arc::new(AtomicUsize::new(0));
    let counted = asked.clone();
    let mut config = config("a1", CLUSTER, true, vec![]);
    // Our test peers all come from 127.0.0.1: refuse it, until allowed.
    let allow = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let allowed = allow.clone();
    config.admission = Some(Admission(Arc::new(move |ip| {
        counted.fetch_add(1, Ordering::SeqCst);
        ip.to_string() != "127.0.0.1" || allowed.load(Ordering::SeqCst)
    })));
    let m1 = start(config);
    wait_primary(&m1);

    let m2 = join("a2", &m1);
    wait_until("the refusal logged on both sides", || {
        logged(&["Connection not allowed, IP 127.0.0.1 not found in allowlist"])
            && logged(&["refused our connection", "your address 127.0.0.1 is not in wsrep_allowlist"])
    });
    assert!(!m2.group.status().primary, "it never joined");
    // m2 retries every few seconds; each side still logs one line a minute.
    let before = asked.load(Ordering::SeqCst);
    wait_until("m2 retried", || asked.load(Ordering::SeqCst) >= before + 3);
    assert_eq!(
        count_logged(&["refused our connection", "your address 127.0.0.1 is not in wsrep_allowlist"]),
        1,
        "the dialer's line is rate-limited"
    );
    assert_eq!(
        count_logged(&["Connection not allowed, IP 127.0.0.1 not found in allowlist"]),
        1,
        "the listener's line is rate-limited"
    );

    // Allowed now (an operator adds the address): m2 gets in by itself.
    allow.store(true, Ordering::SeqCst);
    wait_primary(&m2);
    submit(&m1, b"allowed");
    wait_delivered(&[&m1, &m2], b"allowed");
    m2.group.shutdown();
    m1.group.shutdown();
}

/// A member that listens on one loopback address dials from it too, as
/// Galera's do: the allowlist judges the address the operator named. From
/// the routed source (127.0.0.1, listed) it would get in.
#[test]
fn a_member_is_judged_by_the_address_it_listens_on() {
    let _serial = serial();
    let asked_about = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = asked_about.clone();
    let mut config = config("b1", CLUSTER, true, vec![]);
    config.admission = Some(Admission(Arc::new(move |ip| {
        seen.lock().unwrap().push(ip.to_string());
        ip.to_string() == "127.0.0.1"
    })));
    let m1 = start(config);
    wait_primary(&m1);

    let mut elsewhere = common::config("b2", CLUSTER, false, vec![m1.addr()]);
    elsewhere.listen_addr = "127.0.0.3:0".into();
    let m2 = start(elsewhere);
    wait_until("the refusal logged", || logged(&["Connection not allowed, IP 127.0.0.3 not found in allowlist"]));
    assert!(!m2.group.status().primary, "it never joined");
    let asked = asked_about.lock().unwrap().clone();
    assert!(!asked.is_empty() && asked.iter().all(|ip| ip == "127.0.0.3"), "every dial came from 127.0.0.3: {asked:?}");
    m2.group.shutdown();
    m1.group.shutdown();
}

/// MTR's `galera_allowlist`, with its race decided the hard way: r3
/// (`pc.ignore_quorum`) is isolated, the others remove it and take its
/// address off their lists, and its isolation ends *before* its own timer
/// lets it go on alone. Asking the others how far their logs are, it must
/// be refused like any other connection from its address, and form a
/// component of its own; from the routed source (127.0.0.1, listed) it was
/// answered, and it refused to form one around a log shorter than theirs.
#[test]
fn an_isolated_member_taken_off_the_lists_goes_on_alone() {
    use tandem_group::{Isolation, PartitionPolicy};
    let _serial = serial();
    let refuse = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let listed = |name: &str, bootstrap: bool, peers: Vec<String>| {
        let refuse = refuse.clone();
        let mut c = config(name, CLUSTER, bootstrap, peers);
        c.admission =
            Some(Admission(Arc::new(move |ip| ip.to_string() != "127.0.0.3" || !refuse.load(Ordering::SeqCst))));
        c
    };
    let m1 = start(listed("i1", true, vec![]));
    wait_primary(&m1);
    let m2 = start(listed("i2", false, vec![m1.addr()]));
    wait_primary(&m2);
    m2.group.promote(m2.id()).expect("promote i2");
    let mut third = config("i3", CLUSTER, false, vec![m1.addr()]);
    third.listen_addr = "127.0.0.3:0".into();
    third.partition = PartitionPolicy { ignore_quorum: true, ..Default::default() };
    // Its timer runs long: the isolation ends before it fires.
    third.timeouts.suspect = Duration::from_secs(4);
    let m3 = start(third);
    wait_primary(&m3);
    m3.group.promote(m3.id()).expect("promote i3");
    wait_until("three voters", || {
        [&m1, &m2, &m3].iter().all(|m| m.rec.last_view().is_some_and(|v| v.voters.len() == 3))
    });

    m3.group.isolate(Isolation::Isolated).expect("isolate");
    wait_until("i1 and i2 remove i3", || {
        [&m1, &m2].iter().all(|m| m.rec.last_view().is_some_and(|v| !v.contains(m3.id())))
    });
    refuse.store(true, Ordering::SeqCst);
    submit(&m1, b"after i3 left");
    wait_delivered(&[&m1, &m2], b"after i3 left");
    m3.group.isolate(Isolation::Off).expect("back");

    wait_until("i3 forms a component of its own", || {
        m3.group.status().primary && m3.rec.last_view().is_some_and(|v| v.members.len() == 1)
    });
    assert!(!logged(&["more advanced log"]), "i3 was not told the others' log");
    assert!(logged(&["Connection not allowed, IP 127.0.0.3 not found in allowlist"]));
    assert!([&m1, &m2].iter().all(|m| m.rec.last_view().is_some_and(|v| !v.contains(m3.id()))), "not taken back");
    for m in [m3, m2, m1] {
        m.group.shutdown();
    }
}
