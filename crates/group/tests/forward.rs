//! A follower's connection to its leader, frame by frame (`forward.rs`):
//! what the leader takes it does not answer, what it does not take it
//! hands back, all of it and in order, whoever refuses it.

mod common;

use std::io::Write;

use common::*;
use tandem_group::wire;

fn payloads(origin: u64, texts: &[&str]) -> Vec<wire::AppPayload> {
    texts.iter().map(|t| wire::AppPayload { origin, bytes: wire::Bytes::from(t.as_bytes().to_vec()) }).collect()
}

/// Forwards `texts` as `origin` on `s`, and checks the answer hands every
/// one of them back, in order.
fn handed_back(s: &mut std::net::TcpStream, origin: u64, texts: &[&str]) {
    let sent = payloads(origin, texts);
    s.write_all(&wire::encode_request(&wire::Request::Forward { payloads: sent.clone() }).unwrap()).unwrap();
    let answer: wire::Response = read_frame(s);
    let wire::Response::Returned { payloads: back } = answer else {
        panic!("forwarded payloads not handed back: {answer:?}");
    };
    assert_eq!(back, sent, "all of them, in order");
}

/// Forwarded payloads are answered only when not taken: the leader appends
/// them and says nothing (the next answer on the connection is that of the
/// keepalive sent after them); a member that does not lead hands them back,
/// all of them and in order, and appends none.
#[test]
fn forwards_are_answered_only_when_handed_back_by_a_member_that_does_not_lead() {
    let _serial = serial();
    let members = three_voters(["fw1", "fw2", "fw3"]);
    let all: Vec<&Member> = members.iter().collect();
    let leader = leader_of(&all);
    let followers: Vec<&Member> = all.iter().copied().filter(|m| m.id() != leader.id()).collect();
    // Sent in the name of one follower (a member of the group: an outsider
    // is refused outright), to the leader and to the other follower.
    let sender = followers[0].id();

    let mut s = connect_as(leader, sender);
    let taken = payloads(sender, &["taken-1", "taken-2"]);
    s.write_all(&wire::encode_request(&wire::Request::Forward { payloads: taken }).unwrap()).unwrap();
    s.write_all(&wire::encode_request(&wire::Request::Keepalive).unwrap()).unwrap();
    let answer: wire::Response = read_frame(&mut s);
    assert!(
        matches!(answer, wire::Response::Done),
        "the keepalive's answer comes first, none for the forward: {answer:?}"
    );
    wait_delivered(&all, b"taken-1");
    wait_delivered(&all, b"taken-2");

    let mut s = connect_as(followers[1], sender);
    handed_back(&mut s, sender, &["back-1", "back-2", "back-3"]);
    submit(leader, b"after-the-hand-back");
    wait_delivered(&all, b"after-the-hand-back");
    for m in &all {
        for p in ["back-1", "back-2", "back-3"] {
            assert!(!m.rec.has_message(p.as_bytes()), "{} applied {p}", m.name);
        }
    }
}

/// A member that refuses a forward (here: it does not know the sender,
/// which the group removed, say) hands the payloads back rather than
/// failing them: they were not taken, and the sender's next leader orders
/// them. (Failed, they were lost without a word.)
#[test]
fn a_refused_forward_is_handed_back_not_failed() {
    let _serial = serial();
    let members = three_voters(["rf1", "rf2", "rf3"]);
    let all: Vec<&Member> = members.iter().collect();
    let leader = leader_of(&all);
    let stranger = 0x5eed_u64;
    assert!(all.iter().all(|m| m.id() != stranger));
    let mut s = connect_as(leader, stranger);
    handed_back(&mut s, stranger, &["refused-1", "refused-2"]);
    submit(leader, b"after-the-refusal");
    wait_delivered(&all, b"after-the-refusal");
    for m in &all {
        assert!(!m.rec.has_message(b"refused-1"), "{} applied a refused payload", m.name);
    }
}
