//! State requests, donations and the IST handshake, as the core sees them
//! ordered (`core/transfers.rs`).

use super::*;

#[test]
fn a_node_donates_only_once_live() {
    let mut h = Harness::new(NodeCore::new(uuid(ME), 1, Gtid::UNDEFINED, String::new(), true));
    h.members(vec![(ME, info(ME, 1, Gtid::UNDEFINED))]);
    h.core.on_connected(&Plan::Found);
    h.members(vec![(3, info(3, 1, Gtid::UNDEFINED))]);
    let cmds = h.message(3, 1, 4, Body::StateRequest { donors: String::new(), request: b"r".to_vec() });
    assert!(
        matches!(cmds.as_slice(), [Command::Queue(Task::Donate { joiner, .. })] if joiner.uuid == uuid(3)),
        "{cmds:?}"
    );
    // A process that is not live yet ignores a request naming it.
    let mut restarted = NodeCore::new(uuid(ME), 2, Gtid::UNDEFINED, String::new(), true);
    let outcome = Outcome::StateRequest {
        from: crate::group_state::Sender { uuid: uuid(3), incarnation: 1 },
        token: 4,
        donor: Some(uuid(ME)),
        request: b"r".to_vec(),
        seqno: h.state.seqno,
        bypass: None,
    };
    assert!(restarted.on_ordered(outcome, &h.state).is_empty());
}

/// An IST's handshake: the donor's live, synced process answers the probe
/// (and does nothing else); the request has it run its SST script in bypass
/// mode at the joiner's position.
#[test]
fn a_donor_answers_the_ist_handshake_probe_then_runs_it_at_the_joiners_position() {
    let mut h = Harness::new(NodeCore::new(uuid(ME), 1, Gtid::UNDEFINED, String::new(), true));
    h.members(vec![(ME, info(ME, 1, Gtid::UNDEFINED))]);
    h.core.on_connected(&Plan::Found);
    h.members(vec![(3, info(3, 1, Gtid::UNDEFINED))]);
    let ask = |request: &[u8]| Body::IstRequest { donors: String::new(), request: request.to_vec(), position: 1 };
    let cmds = h.message(3, 1, 4, ask(b""));
    assert_eq!(cmds, vec![Command::Submit(Body::DonorReady { joiner: uuid(3), incarnation: 1 })]);
    // A process that is not live (the group names a member whose state it
    // knew as synced) does not answer.
    let mut restarted = NodeCore::new(uuid(ME), 2, Gtid::UNDEFINED, String::new(), true);
    let probe = Outcome::StateRequest {
        from: crate::group_state::Sender { uuid: uuid(3), incarnation: 1 },
        token: 4,
        donor: Some(uuid(ME)),
        request: vec![],
        seqno: h.state.seqno,
        bypass: Some(1),
    };
    assert!(restarted.on_ordered(probe, &h.state).is_empty());
    let cmds = h.message(3, 1, 5, ask(b"r"));
    assert!(
        matches!(cmds.as_slice(), [Command::Queue(Task::Donate { joiner, bypass: Some(1), request, .. })]
            if joiner.uuid == uuid(3) && request == b"r"),
        "{cmds:?}"
    );
}

/// A donor whose SST script failed tells the group; the joiner it named,
/// and only that joiner, stops waiting for the state (Galera's "State
/// transfer to ... failed", after which the joiner aborts).
#[test]
fn a_failed_donation_reaches_the_joiner_and_no_one_else() {
    use crate::group_state::Sender;
    let mut h = Harness::new(NodeCore::new(uuid(ME), 1, Gtid::UNDEFINED, String::new(), true));
    h.members(vec![(ME, info(ME, 1, Gtid::UNDEFINED))]);
    h.core.on_connected(&Plan::Found);
    h.members(vec![(3, info(3, 1, Gtid::UNDEFINED)), (4, info(4, 1, Gtid::UNDEFINED))]);

    h.core.on_donating(Sender { uuid: uuid(3), incarnation: 2 });
    let sent = h.core.on_sst_sent(-22);
    let failed = Body::TransferFailed { joiner: uuid(3), incarnation: 2, code: -22 };
    assert!(submitted(&sent).contains(&&failed), "{sent:?}");
    h.core.on_donating(Sender { uuid: uuid(4), incarnation: 1 });
    let sent = h.core.on_sst_sent(0);
    assert!(
        !submitted(&sent).iter().any(|b| matches!(b, Body::TransferFailed { .. })),
        "a success is not a failure: {sent:?}"
    );

    // Ordered, it is a command only on the joiner process it names: not on
    // another node, not on an earlier process of this one.
    let cmds = h.message(3, 1, 0, Body::TransferFailed { joiner: uuid(ME), incarnation: 1, code: -32 });
    assert!(cmds.contains(&Command::TransferFailed { donor: uuid(3), code: -32 }), "{cmds:?}");
    for (joiner, incarnation) in [(uuid(4), 1), (uuid(ME), 0)] {
        let cmds = h.message(3, 1, 0, Body::TransferFailed { joiner, incarnation, code: -32 });
        assert!(!cmds.iter().any(|c| matches!(c, Command::TransferFailed { .. })), "{joiner} {incarnation}: {cmds:?}");
    }
}

/// A joiner is told which process of its donor the group named, and sees
/// when the group admits another one: a process not admitted yet when the
/// request was ordered ignored it, and the joiner must ask again (a whole
/// cluster killed and restarted at once).
#[test]
fn a_joiner_learns_which_process_of_its_donor_was_named_and_when_it_restarted() {
    let (mut h, _) = group_with_me(1);
    let cmds = h.message(ME, 1, 5, Body::StateRequest { donors: String::new(), request: b"r".to_vec() });
    assert!(cmds.contains(&Command::Reply { token: 5, reply: Reply::Donor(Some((uuid(OTHER), 1))) }), "{cmds:?}");
    assert!(h.core.in_view((uuid(OTHER), 1)));
    let position = h.state.seqno;
    h.message(OTHER, 2, 0, Body::Rejoin { position });
    assert!(!h.core.in_view((uuid(OTHER), 1)), "the process named is not the donor's any more");
    assert!(h.core.in_view((uuid(OTHER), 2)));
}

/// The joiner goes on with its IST handshake only once an answer to its own
/// process's probe is ordered.
#[test]
fn only_an_answer_to_this_process_readies_the_ist_handshake() {
    let (mut h, _) = group_with_me(1);
    h.message(OTHER, 1, 0, Body::DonorReady { joiner: uuid(ME), incarnation: 0 });
    assert!(!h.core.donor_ready(), "an answer to an earlier process of this node");
    h.message(OTHER, 1, 0, Body::DonorReady { joiner: uuid(OTHER), incarnation: 1 });
    assert!(!h.core.donor_ready(), "an answer to another joiner");
    h.message(OTHER, 1, 0, Body::DonorReady { joiner: uuid(ME), incarnation: 1 });
    assert!(h.core.donor_ready());
}

/// A node resuming asks for its IST handshake before the group has ordered
/// the view that admits it; a failed handshake must still reach it, or it
/// would wait for its own script to give up.
#[test]
fn a_failed_handshake_reaches_a_joiner_not_admitted_yet() {
    let (mut h, _) = group_with_me(1);
    let mut resuming = NodeCore::new(uuid(ME), 2, Gtid::UNDEFINED, String::new(), true);
    let failed = Outcome::TransferFailed {
        donor: uuid(OTHER),
        joiner: crate::group_state::Sender { uuid: uuid(ME), incarnation: 2 },
        code: -5,
    };
    let cmds = resuming.on_ordered(failed, &h.state);
    assert!(cmds.contains(&Command::TransferFailed { donor: uuid(OTHER), code: -5 }), "{cmds:?}");
    // The admitted process of the same node (incarnation 1) is not told.
    let failed = Outcome::TransferFailed {
        donor: uuid(OTHER),
        joiner: crate::group_state::Sender { uuid: uuid(ME), incarnation: 2 },
        code: -5,
    };
    assert!(!h.core.on_ordered(failed, &h.state).iter().any(|c| matches!(c, Command::TransferFailed { .. })));
}
