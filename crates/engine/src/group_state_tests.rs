use std::collections::BTreeMap;

use proptest::prelude::*;
use tandem_group_api::{MemberInfo, Membership, Ordered};

use super::*;
use crate::message::JoinInfo;
use crate::writeset::{flags, Key, KeyType};

fn info(n: u8) -> MemberInfo {
    MemberInfo {
        uuid: [n; 16],
        name: format!("node{n}"),
        group_addr: String::new(),
        incoming: String::new(),
        ..MemberInfo::default()
    }
}

fn membership(ids: &[u8]) -> Membership {
    Membership {
        voters: ids.iter().map(|&i| i as u64).collect(),
        learners: vec![],
        members: ids.iter().map(|&i| (i as u64, info(i))).collect::<BTreeMap<_, _>>(),
    }
}

fn write_set(from: u8, last_seen: Seqno, row: u8) -> Vec<u8> {
    write_set_in(from, last_seen, row, 0)
}

/// A write-set sent in lock epoch `epoch` of its source's incarnation 0.
fn write_set_in(from: u8, last_seen: Seqno, row: u8, epoch: u32) -> Vec<u8> {
    let ws = WriteSet {
        source: Uuid([from; 16]),
        trx_id: 1,
        conn_id: 1,
        flags: flags::TRX_START | flags::TRX_END,
        last_seen,
        safe: last_seen,
        keys: vec![Key { parts: vec![b"db".to_vec(), b"t".to_vec(), vec![row]], kind: KeyType::Exclusive }],
        data: vec![row; 3],
    };
    Envelope { source: Uuid([from; 16]), incarnation: 0, token: 1, body: Body::WriteSet(ws), epoch }.encode()
}

fn msg(from: u8, body: Body) -> Vec<u8> {
    msg_of(from, 0, body)
}

fn msg_of(from: u8, incarnation: u32, body: Body) -> Vec<u8> {
    Envelope { source: Uuid([from; 16]), incarnation, token: 7, body, epoch: 0 }.encode()
}

/// An event of a generated history.
#[derive(Clone, Debug)]
enum Event {
    Members(Vec<u8>),
    Bytes(u64, Vec<u8>),
}

fn feed(state: &mut GroupState, e: &Event) -> Outcome {
    match e {
        Event::Members(ids) => state.apply(Ordered::Membership(membership(ids))),
        Event::Bytes(origin, payload) => state.apply(Ordered::Message { origin: *origin, payload }),
    }
}

#[test]
fn founding_view_consumes_seqno_one_and_founder_is_synced() {
    let mut s = GroupState::default();
    let Outcome::View(v) = s.apply(Ordered::Membership(membership(&[1]))) else { panic!("expected a view") };
    assert_eq!(v.state_id.seqno, 1);
    assert_eq!(v.view_no, 1);
    assert!(!v.state_id.uuid.is_nil() && v.state_id.uuid != Uuid([1; 16]));
    assert_eq!(s.members[0].state, MemberState::Synced);
}

#[test]
fn founder_with_saved_position_continues_that_history() {
    let saved = Gtid { uuid: Uuid([9; 16]), seqno: 41 };
    let mut m = membership(&[1]);
    m.members.get_mut(&1).unwrap().app =
        JoinInfo { incarnation: 1, position: saved, arbitrator: false, inherited_last_write: None }.encode();
    let Outcome::View(v) = GroupState::default().apply(Ordered::Membership(m)) else { panic!() };
    assert_eq!(v.state_id, Gtid { uuid: Uuid([9; 16]), seqno: 42 });
}

/// Founded on Galera's data at 27, whose cache showed 26 and 27 as
/// configuration changes: the history keeps that, snapshots carry it, and
/// a member at 25 is shown replaying from the history's start.
#[test]
fn a_founder_on_galera_data_passes_on_its_last_write() {
    let saved = Gtid { uuid: Uuid([9; 16]), seqno: 27 };
    let mut s = GroupState::default();
    let mut m = membership(&[1]);
    let founder = JoinInfo { incarnation: 1, position: saved, arbitrator: false, inherited_last_write: Some(25) };
    m.members.get_mut(&1).unwrap().app = founder.encode();
    s.apply(Ordered::Membership(m));
    assert_eq!((s.first_seqno, s.inherited_last_write), (27, Some(25)));
    assert_eq!(GroupState::decode(&s.encode()).unwrap(), s);
    add(&mut s, &[1, 2], 2, 1, Gtid { uuid: Uuid([9; 16]), seqno: 25 });
    assert_eq!(s.member(Uuid([2; 16])).unwrap().ist, Some((28, 28)));
    add(&mut s, &[1, 2, 3], 3, 1, Gtid { uuid: Uuid([9; 16]), seqno: 24 });
    assert_eq!(s.member(Uuid([3; 16])).unwrap().ist, None, "24 lacks the write-set 25");
    // A claim beyond the founder's own position is not taken.
    let mut m = membership(&[1]);
    m.members.get_mut(&1).unwrap().app = JoinInfo { inherited_last_write: Some(30), ..founder }.encode();
    let mut other = GroupState::default();
    other.apply(Ordered::Membership(m));
    assert_eq!(other.inherited_last_write, None);
}

/// Members 1 to 4; 1 and 2 in site 0, 3 and 4 in site 1; `joiner` joins last.
fn two_sites(joiner: u8) -> GroupState {
    let mut s = GroupState::default();
    let mut m = membership(&[1]);
    for n in [1, 2, 3, 4].into_iter().filter(|&n| n != joiner).chain([joiner]) {
        let mut i = info(n);
        i.segment = u8::from(n >= 3);
        m.voters.push(u64::from(n));
        m.members.insert(u64::from(n), i);
        s.apply(Ordered::Membership(m.clone()));
        if n != joiner {
            s.set_state(Uuid([n; 16]), MemberState::Synced);
        }
    }
    s
}

#[test]
fn a_donor_is_chosen_in_the_joiners_site_first() {
    let req = |donors: &str| Body::StateRequest { donors: donors.into(), request: b"mariabackup\0addr".to_vec() };
    let donor = |s: &mut GroupState, joiner: u8, donors: &str| match s
        .apply(Ordered::Message { origin: u64::from(joiner), payload: &msg(joiner, req(donors)) })
    {
        Outcome::StateRequest { donor, .. } => donor,
        other => panic!("{other:?}"),
    };
    let mut s = two_sites(4);
    assert_eq!(s.segment_of(Uuid([4; 16])), 1);
    assert_eq!(donor(&mut s.clone(), 4, ""), Some(Uuid([3; 16])), "node 3 shares node 4's site");
    assert_eq!(donor(&mut s.clone(), 4, "node1"), Some(Uuid([1; 16])), "a named donor comes first");
    assert_eq!(donor(&mut s.clone(), 4, "node9,"), Some(Uuid([3; 16])), "then the joiner's site");
    s.set_state(Uuid([3; 16]), MemberState::Donor);
    assert_eq!(donor(&mut s, 4, ""), Some(Uuid([1; 16])), "its site busy: another site");
    let mut s = two_sites(2);
    assert_eq!(donor(&mut s, 2, ""), Some(Uuid([1; 16])), "site 0 is the default site");
    // Encoded with the state, and checked when decoded.
    let s = two_sites(4);
    let back = GroupState::decode(&s.encode()).unwrap();
    assert_eq!(back.segments, vec![(Uuid([3; 16]), 1), (Uuid([4; 16]), 1)]);
    let mut bad = s.clone();
    bad.segments.push((Uuid([9; 16]), 1));
    assert!(GroupState::decode(&bad.encode()).unwrap_err().contains("site kept for no member"));
}

#[test]
fn joiner_gets_a_synced_donor_honouring_the_donor_list() {
    let mut s = GroupState::default();
    s.apply(Ordered::Membership(membership(&[1])));
    s.apply(Ordered::Membership(membership(&[1, 2])));
    s.apply(Ordered::Membership(membership(&[1, 2, 3])));
    assert_eq!(s.member(Uuid([3; 16])).unwrap().state, MemberState::Joiner);
    // node2 is not synced yet, and the list has no trailing comma: nobody.
    let req = |donors: &str| Body::StateRequest { donors: donors.into(), request: b"mariabackup\0addr".to_vec() };
    let Outcome::StateRequest { donor, .. } =
        s.clone().apply(Ordered::Message { origin: 3, payload: &msg(3, req("node2")) })
    else {
        panic!()
    };
    assert_eq!(donor, None);
    let Outcome::StateRequest { donor, .. } =
        s.clone().apply(Ordered::Message { origin: 3, payload: &msg(3, req("node2,")) })
    else {
        panic!()
    };
    assert_eq!(donor, Some(Uuid([1; 16])));
    let Outcome::StateRequest { donor, .. } = s.apply(Ordered::Message { origin: 3, payload: &msg(3, req("")) }) else {
        panic!()
    };
    assert_eq!(donor, Some(Uuid([1; 16])));
    assert_eq!(s.member(Uuid([1; 16])).unwrap().state, MemberState::Donor);
}

#[test]
fn promotion_without_member_change_is_not_a_view() {
    let mut s = GroupState::default();
    s.apply(Ordered::Membership(membership(&[1])));
    s.apply(Ordered::Membership(membership(&[1, 2])));
    let before = s.seqno;
    assert_eq!(s.apply(Ordered::Membership(membership(&[1, 2]))), Outcome::Nothing);
    assert_eq!(s.seqno, before);
}

#[test]
fn messages_from_non_members_and_garbage_are_skipped_without_a_seqno() {
    let mut s = GroupState::default();
    s.apply(Ordered::Membership(membership(&[1])));
    let before = s.seqno;
    assert_eq!(s.apply(Ordered::Message { origin: 5, payload: &write_set(5, 0, 1) }), Outcome::Nothing);
    assert_eq!(s.apply(Ordered::Message { origin: 1, payload: b"\x01garbage" }), Outcome::Nothing);
    assert_eq!(s.seqno, before);
}

fn arb_event() -> impl Strategy<Value = Event> {
    prop_oneof![
        1 => prop::sample::subsequence(vec![1u8, 2, 3, 4], 1..=4).prop_map(|mut v| { v.insert(0, 1); v.dedup(); Event::Members(v) }),
        6 => (1u8..=4, 0i64..6, 0u8..5).prop_map(|(from, lag, row)| Event::Bytes(from as u64, write_set(from, -lag, row))),
        1 => (1u8..=4).prop_map(|from| Event::Bytes(from as u64, msg(from, Body::Causal))),
        1 => (1u8..=4).prop_map(|from| Event::Bytes(from as u64, msg(from, Body::State(MemberState::Synced)))),
        1 => (1u8..=4).prop_map(|from| Event::Bytes(from as u64, msg(from, Body::ViewBump))),
        1 => (1u8..=4, 0u32..4, -1i64..8).prop_map(|(from, inc, pos)| Event::Bytes(from as u64, msg_of(from, inc, Body::Rejoin { position: pos }))),
        1 => (1u8..=4, 0u32..4).prop_map(|(from, inc)| Event::Bytes(from as u64, msg_of(from, inc, Body::State(MemberState::Synced)))),
        2 => (1u8..=4, any::<bool>()).prop_map(|(from, pause)| Event::Bytes(from as u64, msg(from, Body::FlowControl { pause }))),
    ]
}

proptest! {
    /// Every replica that sees the same ordered events (or a snapshot and the
    /// events after it) produces the same outcomes, and the seqnos handed to
    /// write-sets and views are dense: each exactly one above the last.
    #[test]
    fn replicas_derive_identical_dense_histories(events in prop::collection::vec(arb_event(), 1..150), cut in 0usize..150) {
        let events: Vec<Event> = std::iter::once(Event::Members(vec![1])).chain(events).collect();
        let cut = cut.min(events.len());
        let mut a = GroupState::default();
        let mut b = GroupState::default();
        let mut late: Option<GroupState> = None;
        let mut last = 0;
        for (i, e) in events.iter().enumerate() {
            if i == cut {
                late = Some(GroupState::decode(&a.encode()).unwrap());
            }
            let oa = feed(&mut a, e);
            let ob = feed(&mut b, e);
            if let Some(l) = late.as_mut() {
                prop_assert_eq!(&feed(l, e), &oa);
            }
            prop_assert_eq!(&oa, &ob);
            prop_assert_eq!(a.check_invariants(), Ok(()));
            let consumed = match &oa {
                Outcome::WriteSet { seqno, .. } => Some(*seqno),
                Outcome::View(v) => Some(v.state_id.seqno),
                _ => None,
            };
            if let Some(s) = consumed {
                prop_assert_eq!(s, last + 1, "seqnos must be dense");
                last = s;
            }
            prop_assert_eq!(a.seqno, last);
        }
        prop_assert_eq!(&a, &b);
    }
}

/// Joins node `n` (incarnation `inc`, data at `position`) to `s` through a
/// membership that adds it.
fn add(s: &mut GroupState, ids: &[u8], n: u8, inc: u32, position: Gtid) -> Outcome {
    let mut m = membership(ids);
    m.members.get_mut(&(n as u64)).unwrap().app =
        JoinInfo { incarnation: inc, position, arbitrator: false, inherited_last_write: None }.encode();
    s.apply(Ordered::Membership(m))
}

#[test]
fn a_rejoin_admits_the_new_incarnation_with_a_view_once() {
    let mut s = GroupState::default();
    s.apply(Ordered::Membership(membership(&[1])));
    add(&mut s, &[1, 2], 2, 1, Gtid::UNDEFINED);
    s.apply(Ordered::Message { origin: 2, payload: &msg_of(2, 1, Body::State(MemberState::Synced)) });
    assert_eq!(s.member(Uuid([2; 16])).unwrap().state, MemberState::Synced);
    let before = s.seqno;
    let Outcome::View(v) =
        s.apply(Ordered::Message { origin: 2, payload: &msg_of(2, 2, Body::Rejoin { position: before - 1 }) })
    else {
        panic!("a rejoin is a view")
    };
    assert_eq!(v.state_id.seqno, before + 1);
    let m = s.member(Uuid([2; 16])).unwrap();
    assert_eq!((m.incarnation, m.state), (2, MemberState::Joiner), "not synced any more");
    assert_eq!(m.ist, Some((before, before)), "one seqno to catch up on");
    // The same rejoin again (a resubmission) and an older one change nothing.
    for inc in [2, 1] {
        let again = s.apply(Ordered::Message { origin: 2, payload: &msg_of(2, inc, Body::Rejoin { position: 0 }) });
        assert_eq!(again, Outcome::Nothing);
    }
    assert_eq!(s.seqno, before + 1);
}

#[test]
fn messages_of_an_older_incarnation_change_no_state_but_their_write_sets_count() {
    let mut s = GroupState::default();
    s.apply(Ordered::Membership(membership(&[1])));
    add(&mut s, &[1, 2], 2, 3, Gtid::UNDEFINED);
    // Incarnation 2 died with these in flight; the group knows incarnation 3.
    for body in [Body::State(MemberState::Synced), Body::Causal, Body::ViewBump, Body::Progress(99)] {
        assert_eq!(s.apply(Ordered::Message { origin: 2, payload: &msg_of(2, 2, body) }), Outcome::Nothing);
    }
    assert_eq!(s.member(Uuid([2; 16])).unwrap().state, MemberState::Joiner);
    let before = s.seqno;
    let Outcome::WriteSet { from, seqno, .. } =
        s.apply(Ordered::Message { origin: 2, payload: &write_set(2, before, 1) })
    else {
        panic!("an ordered write-set of a dead incarnation is still a transaction")
    };
    assert_eq!((from.incarnation, seqno), (0, before + 1));
}

/// Member 1 alone orders five write-sets, then member 3 is added with its
/// position at seqno 2 of the same history.
fn ordered_five_then_added_at_two() -> GroupState {
    let mut s = GroupState::default();
    s.apply(Ordered::Membership(membership(&[1])));
    for _ in 0..5 {
        let next = s.seqno;
        s.apply(Ordered::Message { origin: 1, payload: &write_set(1, next, 2) });
    }
    let history = s.group_uuid;
    add(&mut s, &[1, 3], 3, 1, Gtid { uuid: history, seqno: 2 });
    s
}

#[test]
fn a_member_added_with_its_position_gets_an_ist_range_until_synced() {
    let mut s = ordered_five_then_added_at_two();
    assert_eq!(s.member(Uuid([3; 16])).unwrap().ist, Some((3, 6)));
    // From another history there is nothing to replay.
    add(&mut s, &[1, 3, 4], 4, 1, Gtid { uuid: Uuid([8; 16]), seqno: 2 });
    assert_eq!(s.member(Uuid([4; 16])).unwrap().ist, None);
    s.apply(Ordered::Message { origin: 3, payload: &msg_of(3, 1, Body::State(MemberState::Synced)) });
    assert_eq!(s.member(Uuid([3; 16])).unwrap().ist, None);
}

/// An IST's handshake (`Body::IstRequest`): the empty probe names the donor
/// it would get and reserves nobody; the request itself reserves the donor,
/// carries the joiner's position, and leaves its IST range alone (a state
/// transfer's request clears it).
#[test]
fn an_ist_handshake_is_probed_then_reserves_a_donor_and_keeps_the_ist() {
    let mut s = ordered_five_then_added_at_two();
    let ask = |request: &[u8]| Body::IstRequest { donors: String::new(), request: request.to_vec(), position: 2 };
    let Outcome::StateRequest { donor, bypass, request, .. } =
        s.apply(Ordered::Message { origin: 3, payload: &msg_of(3, 1, ask(b"")) })
    else {
        panic!("a probe is answered")
    };
    assert_eq!((donor, bypass, request.len()), (Some(Uuid([1; 16])), Some(2), 0));
    assert_eq!(s.member(Uuid([1; 16])).unwrap().state, MemberState::Synced, "a probe reserves no donor");
    let Outcome::StateRequest { donor, bypass, .. } =
        s.apply(Ordered::Message { origin: 3, payload: &msg_of(3, 1, ask(b"mariabackup\0addr")) })
    else {
        panic!("a handshake is a state request")
    };
    assert_eq!((donor, bypass), (Some(Uuid([1; 16])), Some(2)));
    assert_eq!(s.member(Uuid([1; 16])).unwrap().state, MemberState::Donor);
    assert_eq!(s.member(Uuid([3; 16])).unwrap().ist, Some((3, 6)), "the IST still comes");
    // The donor is busy: a second probe hears there is none.
    let Outcome::StateRequest { donor, .. } = s.apply(Ordered::Message { origin: 3, payload: &msg_of(3, 1, ask(b"")) })
    else {
        panic!()
    };
    assert_eq!(donor, None);
    let full = Body::StateRequest { donors: String::new(), request: b"mariabackup\0addr".to_vec() };
    s.apply(Ordered::Message { origin: 1, payload: &msg(1, Body::State(MemberState::Synced)) });
    s.apply(Ordered::Message { origin: 3, payload: &msg_of(3, 1, full) });
    assert_eq!(s.member(Uuid([3; 16])).unwrap().ist, None, "a full transfer replaces the IST");
}

#[test]
fn a_new_history_remembers_where_it_started() {
    let saved = Gtid { uuid: Uuid([9; 16]), seqno: 41 };
    let mut s = GroupState::default();
    add(&mut s, &[1], 1, 1, saved);
    assert_eq!(s.first_seqno, 41);
    let mut fresh = GroupState::default();
    fresh.apply(Ordered::Membership(membership(&[1])));
    assert_eq!(fresh.first_seqno, 0);
}

#[test]
fn flow_control_pauses_until_every_member_that_asked_lets_go() {
    let mut s = GroupState::default();
    s.apply(Ordered::Membership(membership(&[1])));
    add(&mut s, &[1, 2], 2, 0, Gtid::UNDEFINED);
    add(&mut s, &[1, 2, 3], 3, 0, Gtid::UNDEFINED);
    let seqno = s.seqno;
    let fc = |s: &mut GroupState, from: u8, pause: bool| {
        s.apply(Ordered::Message { origin: from as u64, payload: &msg(from, Body::FlowControl { pause }) })
    };
    let Outcome::FlowControl { from, pause: true } = fc(&mut s, 3, true) else { panic!("a flow-control outcome") };
    assert_eq!(from.uuid, Uuid([3; 16]));
    assert!(s.paused());
    fc(&mut s, 2, true);
    fc(&mut s, 2, true); // a repeat changes nothing
    assert_eq!(s.paused_by, vec![Uuid([2; 16]), Uuid([3; 16])]);
    fc(&mut s, 3, false);
    assert!(s.paused(), "node 2 still holds the group");
    fc(&mut s, 2, false);
    assert!(!s.paused());
    assert_eq!(s.seqno, seqno, "flow control consumes no seqno");
}

#[test]
fn a_member_that_leaves_or_restarts_takes_its_pause_with_it() {
    let mut s = GroupState::default();
    s.apply(Ordered::Membership(membership(&[1])));
    add(&mut s, &[1, 2], 2, 1, Gtid::UNDEFINED);
    add(&mut s, &[1, 2, 3], 3, 1, Gtid::UNDEFINED);
    for from in [2u8, 3] {
        s.apply(Ordered::Message { origin: from as u64, payload: &msg_of(from, 1, Body::FlowControl { pause: true }) });
    }
    s.apply(Ordered::Membership(membership(&[1, 2])));
    assert_eq!(s.paused_by, vec![Uuid([2; 16])], "node 3 left");
    // A pause of the dead incarnation, ordered late, is ignored; the new one's counts.
    s.apply(Ordered::Message { origin: 2, payload: &msg_of(2, 2, Body::Rejoin { position: 0 }) });
    assert!(!s.paused(), "node 2 restarted");
    s.apply(Ordered::Message { origin: 2, payload: &msg_of(2, 1, Body::FlowControl { pause: true }) });
    assert!(!s.paused());
    s.apply(Ordered::Message { origin: 2, payload: &msg_of(2, 2, Body::FlowControl { pause: true }) });
    assert!(s.paused());
}

#[test]
fn snapshots_carry_the_paused_set_and_older_snapshots_still_decode() {
    let mut s = GroupState::default();
    s.apply(Ordered::Membership(membership(&[1])));
    add(&mut s, &[1, 2], 2, 0, Gtid::UNDEFINED);
    s.apply(Ordered::Message { origin: 2, payload: &msg(2, Body::FlowControl { pause: true }) });
    let back = GroupState::decode(&s.encode()).unwrap();
    assert_eq!(back, s);
    assert!(back.paused());
    // A build without flow control wrote the state alone.
    let older = bincode::serialize(&s).unwrap();
    let back = GroupState::decode(&older).unwrap();
    assert!(!back.paused());
    assert_eq!(back.seqno, s.seqno);
    // A damaged tail is an error, not an empty set.
    let mut damaged = s.encode();
    damaged.push(0xff);
    damaged.truncate(older.len() + 3);
    assert!(GroupState::decode(&damaged).is_err());
}

/// A member that restores a snapshot taken after a source's new lock
/// epoch began certifies that source's next write-sets as the others do.
#[test]
fn snapshots_carry_the_lock_epochs() {
    let verdict = |o: Outcome| match o {
        Outcome::WriteSet { verdict, .. } => verdict,
        other => panic!("{other:?}"),
    };
    let mut s = GroupState::default();
    s.apply(Ordered::Membership(membership(&[1])));
    let founded = s.seqno;
    let first = write_set_in(1, founded, 5, 0);
    assert!(matches!(verdict(s.apply(Ordered::Message { origin: 1, payload: &first })), Verdict::Pass { .. }));
    // Epoch 1 begins on another row.
    let second = write_set_in(1, founded, 6, 1);
    assert!(matches!(verdict(s.apply(Ordered::Message { origin: 1, payload: &second })), Verdict::Pass { .. }));
    let mut restored = GroupState::decode(&s.encode()).unwrap();
    assert_eq!(restored, s);
    // Row 5 was written in epoch 0, unseen: a conflict on both.
    let late = write_set_in(1, founded, 5, 1);
    assert_eq!(verdict(s.apply(Ordered::Message { origin: 1, payload: &late })), Verdict::Fail);
    assert_eq!(verdict(restored.apply(Ordered::Message { origin: 1, payload: &late })), Verdict::Fail);
    // A snapshot of a build before lock epochs (the sections up to the
    // ballots) still decodes, with no epochs.
    let mut older = bincode::serialize(&s).unwrap();
    bincode::serialize_into(&mut older, &s.paused_by).unwrap();
    bincode::serialize_into(&mut older, &s.arbitrators).unwrap();
    bincode::serialize_into(&mut older, &s.ballots).unwrap();
    let back = GroupState::decode(&older).unwrap();
    assert!(back.cert.epochs.is_empty());
    assert_eq!(back.seqno, s.seqno);
}

/// A membership where member `arb` said it is an arbitrator.
fn with_arbitrator(ids: &[u8], arb: u8) -> Membership {
    let mut m = membership(ids);
    m.members.get_mut(&(arb as u64)).unwrap().app =
        JoinInfo { incarnation: 0, position: Gtid::UNDEFINED, arbitrator: true, inherited_last_write: None }.encode();
    m
}

#[test]
fn an_arbitrator_is_never_a_donor_even_when_named() {
    let mut s = GroupState::default();
    s.apply(Ordered::Membership(membership(&[1])));
    s.apply(Ordered::Membership(with_arbitrator(&[1, 2], 2)));
    s.apply(Ordered::Message { origin: 2, payload: &msg(2, Body::State(MemberState::Synced)) });
    s.apply(Ordered::Membership(with_arbitrator(&[1, 2, 3], 2)));
    assert_eq!(s.arbitrators, vec![Uuid([2; 16])]);
    assert_eq!(s.member(Uuid([2; 16])).unwrap().state, MemberState::Synced, "it is a member like any other");
    let req = |donors: &str| Body::StateRequest { donors: donors.into(), request: b"mariabackup\0addr".to_vec() };
    // Named first, the arbitrator is passed over for the next synced node.
    let Outcome::StateRequest { donor, .. } =
        s.clone().apply(Ordered::Message { origin: 3, payload: &msg(3, req("node2,")) })
    else {
        panic!()
    };
    assert_eq!(donor, Some(Uuid([1; 16])));
    // Named alone, there is no donor at all rather than one without data.
    let Outcome::StateRequest { donor, .. } =
        s.clone().apply(Ordered::Message { origin: 3, payload: &msg(3, req("node2")) })
    else {
        panic!()
    };
    assert_eq!(donor, None);
    // With node1 busy donating, the only other synced member is the arbitrator: nobody.
    s.apply(Ordered::Message { origin: 1, payload: &msg(1, Body::State(MemberState::Donor)) });
    let Outcome::StateRequest { donor, .. } = s.apply(Ordered::Message { origin: 3, payload: &msg(3, req("")) }) else {
        panic!()
    };
    assert_eq!(donor, None);
}

#[test]
fn snapshots_carry_the_arbitrators_and_a_departed_one_is_forgotten() {
    let mut s = GroupState::default();
    s.apply(Ordered::Membership(membership(&[1])));
    s.apply(Ordered::Membership(with_arbitrator(&[1, 2], 2)));
    let back = GroupState::decode(&s.encode()).unwrap();
    assert_eq!(back.arbitrators, vec![Uuid([2; 16])]);
    assert_eq!(back, s);
    // A build without arbitrators wrote the state and the paused set only.
    let mut older = bincode::serialize(&s).unwrap();
    bincode::serialize_into(&mut older, &s.paused_by).unwrap();
    assert!(GroupState::decode(&older).unwrap().arbitrators.is_empty());
    s.apply(Ordered::Membership(membership(&[1])));
    assert!(s.arbitrators.is_empty());
}

/// Three synced members, 1..=3, and one write-set ordered at the returned seqno.
fn three_synced_with_a_write_set() -> (GroupState, Seqno) {
    let mut s = GroupState::default();
    s.apply(Ordered::Membership(membership(&[1])));
    add(&mut s, &[1, 2], 2, 0, Gtid::UNDEFINED);
    add(&mut s, &[1, 2, 3], 3, 0, Gtid::UNDEFINED);
    for n in [2, 3] {
        s.apply(Ordered::Message { origin: n as u64, payload: &msg(n, Body::State(MemberState::Synced)) });
    }
    s.apply(Ordered::Message { origin: 1, payload: &write_set(1, s.seqno, 9) });
    let seqno = s.seqno;
    (s, seqno)
}

fn vote(s: &mut GroupState, from: u8, seqno: Seqno, code: u64) {
    let body = Body::Vote { seqno, code, reason: "Error_code: 1050;".into(), policy: 0 };
    s.apply(Ordered::Message { origin: from as u64, payload: &msg(from, body) });
}

const E: u64 = (1 << 63) | 77;

#[test]
fn two_of_three_failing_alike_decide_without_the_third() {
    let (mut s, ws) = three_synced_with_a_write_set();
    vote(&mut s, 1, ws, E);
    assert_eq!(s.ballots.decision(ws), None);
    vote(&mut s, 2, ws, E);
    assert_eq!(s.ballots.decision(ws), Some(E));
    let back = GroupState::decode(&s.encode()).unwrap();
    assert_eq!(back.ballots, s.ballots, "decisions travel in snapshots, for members that replay later");
}

#[test]
fn a_tie_left_by_a_departing_member_goes_to_success() {
    let (mut s, ws) = three_synced_with_a_write_set();
    vote(&mut s, 2, ws, E);
    vote(&mut s, 3, ws, crate::voting::SUCCESS);
    assert_eq!(s.ballots.decision(ws), None, "node 1 has not answered");
    s.apply(Ordered::Membership(membership(&[2, 3])));
    assert_eq!(s.ballots.decision(ws), Some(crate::voting::SUCCESS), "1:1 between the two left");
}

#[test]
fn a_member_reporting_progress_past_the_seqno_counts_as_success() {
    let (mut s, ws) = three_synced_with_a_write_set();
    vote(&mut s, 1, ws, E);
    vote(&mut s, 2, ws, crate::voting::SUCCESS);
    s.apply(Ordered::Message { origin: 3, payload: &msg(3, Body::Progress(ws)) });
    assert_eq!(s.ballots.decision(ws), Some(crate::voting::SUCCESS));
}

#[test]
fn arbitrators_never_count() {
    let mut s = GroupState::default();
    s.apply(Ordered::Membership(membership(&[1])));
    s.apply(Ordered::Membership(with_arbitrator(&[1, 2], 2)));
    s.apply(Ordered::Message { origin: 2, payload: &msg(2, Body::State(MemberState::Synced)) });
    s.apply(Ordered::Message { origin: 2, payload: &msg(2, Body::Progress(s.seqno + 5)) });
    s.apply(Ordered::Message { origin: 1, payload: &write_set(1, s.seqno, 9) });
    let ws = s.seqno;
    vote(&mut s, 1, ws, E);
    assert_eq!(s.ballots.decision(ws), Some(E), "the only data node decides alone");
}

/// A burst followed by quiet: once every member has reported progress up
/// to the last seqno, the index is empty at that point of the order (not at
/// the next multiple of the purge interval, which a quiet group never
/// reaches), so the snapshot a joiner is sent carries no keys.
#[test]
fn progress_reports_purge_the_index_without_waiting_for_more_write_sets() {
    let mut s = GroupState::default();
    s.apply(Ordered::Membership(membership(&[1, 2])));
    for row in 0..100u8 {
        s.apply(Ordered::Message { origin: 1, payload: &write_set(1, s.seqno, row) });
    }
    let last = s.seqno;
    assert_ne!(last % PURGE_INTERVAL, 0, "the burst must not end on a periodic purge");
    let full = s.cert.index_size();
    assert!(full >= 100, "every row is indexed: {full}");
    s.apply(Ordered::Message { origin: 2, payload: &msg(2, Body::Progress(last - 10)) });
    s.apply(Ordered::Message { origin: 1, payload: &msg(1, Body::Progress(last)) });
    let partly = s.cert.index_size();
    assert!(partly < full && partly > 0, "up to node 2's report only: {partly} of {full}");
    assert_eq!(s.cert.purged_upto(), last - 10);
    let before = s.encode().len();
    s.apply(Ordered::Message { origin: 2, payload: &msg(2, Body::Progress(last)) });
    assert_eq!(s.cert.index_size(), 0);
    assert!(s.encode().len() < before, "the snapshot shrinks with the index");
    // A write-set that saw less than the purge point can no longer be
    // proven free of conflicts, on every member alike.
    let outcome = s.apply(Ordered::Message { origin: 2, payload: &write_set(2, last - 20, 1) });
    assert!(matches!(outcome, Outcome::WriteSet { verdict: Verdict::Fail, .. }), "{outcome:?}");
}

#[test]
fn a_snapshot_that_breaks_the_states_invariants_is_refused() {
    let mut s = GroupState::default();
    s.apply(Ordered::Membership(membership(&[1, 2])));
    assert_eq!(s.check_invariants(), Ok(()));
    assert!(GroupState::decode(&s.encode()).is_ok());
    // A pause held by a node that is not a member: nobody could lift it.
    let mut broken = s.clone();
    broken.paused_by = vec![Uuid([9; 16])];
    let why = GroupState::decode(&broken.encode()).unwrap_err();
    assert!(why.contains("inconsistent group snapshot") && why.contains("pause"), "{why}");
    // An index purged beyond the history.
    let mut broken = s.clone();
    broken.cert = crate::certification::Certifier::new(s.seqno + 5);
    let why = GroupState::decode(&broken.encode()).unwrap_err();
    assert!(why.contains("purged up to"), "{why}");
    // Members out of order (the state keeps them sorted by uuid).
    let mut broken = s;
    broken.members.reverse();
    assert_eq!(broken.check_invariants(), Err("members out of order".into()));
}
