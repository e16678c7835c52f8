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
        logged(&["refused: 127.0.0.1 is not in this server's wsrep_allowlist"])
            && logged(&["refused our connection", "not in wsrep_allowlist"])
    });
    assert!(!m2.group.status().primary, "it never joined");
    // m2 retries every few seconds; each side still logs one line a minute.
    let before = asked.load(Ordering::SeqCst);
    wait_until("m2 retried", || asked.load(Ordering::SeqCst) >= before + 3);
    assert_eq!(
        count_logged(&["refused our connection", "not in wsrep_allowlist"]),
        1,
        "the dialer's line is rate-limited"
    );
    assert_eq!(
        count_logged(&["refused: 127.0.0.1 is not in this server's wsrep_allowlist"]),
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
