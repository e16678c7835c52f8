use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

const E1: Code = (1 << 63) | 5;
const E2: Code = (1 << 63) | 9;

fn counts(v: &[(Code, usize)]) -> BTreeMap<Code, usize> {
    v.iter().copied().collect()
}

fn uuid(n: u8) -> Uuid {
    Uuid([n; 16])
}

fn voter(n: u8, committed: Seqno) -> Voter {
    Voter { uuid: uuid(n), eligible: true, committed }
}

#[test]
fn error_codes_are_never_success_and_equal_texts_vote_alike() {
    assert_ne!(code_of(b""), SUCCESS);
    assert_ne!(code_of(b" Error_code: 1050;"), SUCCESS);
    assert_eq!(code_of(b" Error_code: 1050;"), code_of(b" Error_code: 1050;"));
    assert_ne!(code_of(b" Error_code: 1050;"), code_of(b" Error_code: 1051;"));
    // Pinned: a change would make nodes of two builds disagree on every vote.
    assert_eq!(code_of(b"a"), 0xaf63dc4c8601ec8c | (1 << 63));
}

#[test]
fn a_majority_decides_once_the_missing_votes_cannot_change_it() {
    assert_eq!(winner(&counts(&[(E1, 2)]), 1, 0), Some(E1), "2 of 3 failed alike");
    assert_eq!(winner(&counts(&[(E1, 1)]), 2, 0), None, "1 of 3: wait");
    assert_eq!(winner(&counts(&[(E1, 1), (SUCCESS, 1)]), 1, 0), None, "the third decides");
    assert_eq!(winner(&counts(&[(SUCCESS, 2)]), 1, 0), Some(SUCCESS));
    assert_eq!(winner(&counts(&[(E1, 2), (SUCCESS, 1)]), 0, 0), Some(E1));
}

#[test]
fn success_wins_a_tie_and_the_larger_code_wins_between_failures() {
    assert_eq!(winner(&counts(&[(E1, 1), (SUCCESS, 1)]), 0, 0), Some(SUCCESS));
    assert_eq!(winner(&counts(&[(E1, 1), (E2, 1)]), 0, 0), Some(E2));
    assert_eq!(winner(&counts(&[(E1, 2), (E2, 2), (SUCCESS, 1)]), 0, 0), Some(E2));
    // A failure leading by one with one vote missing: an unseen code could tie it and win.
    assert_eq!(winner(&counts(&[(E1, 1)]), 1, 0), None);
    // Success leading by one with one vote missing: a tie would still be success.
    assert_eq!(winner(&counts(&[(SUCCESS, 1)]), 1, 0), Some(SUCCESS));
}

#[test]
fn a_vote_policy_lets_enough_successes_win_against_a_majority() {
    assert_eq!(winner(&counts(&[(E1, 3), (SUCCESS, 1)]), 0, 1), Some(SUCCESS), "policy 1: one success is enough");
    assert_eq!(winner(&counts(&[(E1, 3), (SUCCESS, 1)]), 0, 2), Some(E1), "policy 2 not reached: majority");
    assert_eq!(winner(&counts(&[(E1, 3), (SUCCESS, 1)]), 1, 2), None, "the missing vote may reach it");
}

#[test]
fn nobody_counted_means_success() {
    assert_eq!(winner(&BTreeMap::new(), 0, 0), Some(SUCCESS));
    assert_eq!(winner(&BTreeMap::new(), 2, 0), None);
}

proptest! {
    /// Once decided, no way of casting the missing votes changes the winner
    /// that a full count would give.
    #[test]
    fn a_decision_is_final(votes in proptest::collection::vec(0u8..4, 1..7), cut in 0usize..7, policy in 0u32..4) {
        let code = |v: u8| if v == 0 { SUCCESS } else { (1 << 63) | v as u64 };
        let cut = cut.min(votes.len());
        let mut early = BTreeMap::new();
        for &v in &votes[..cut] {
            *early.entry(code(v)).or_insert(0) += 1;
        }
        let mut full = BTreeMap::new();
        for &v in &votes {
            *full.entry(code(v)).or_insert(0) += 1;
        }
        let complete = winner(&full, 0, policy);
        prop_assert!(complete.is_some(), "a complete count always decides");
        if let Some(w) = winner(&early, votes.len() - cut, policy) {
            prop_assert_eq!(Some(w), complete);
        }
    }
}

#[test]
fn a_ballot_opens_on_a_failure_and_ignores_repeats_and_unsolicited_successes() {
    let mut b = Ballots::default();
    assert_eq!(b.cast(7, uuid(1), SUCCESS, 0), Cast::Ignored, "nobody failed 7");
    assert!(b.open.is_empty());
    assert_eq!(b.cast(7, uuid(1), E1, 0), Cast::Opened);
    assert_eq!(b.cast(7, uuid(1), E2, 0), Cast::Ignored, "the first vote stands");
    assert_eq!(b.cast(7, uuid(2), SUCCESS, 0), Cast::Counted);
    assert_eq!(b.open[&7].votes[&uuid(1)], E1);
}

#[test]
fn members_that_applied_count_as_success_and_leavers_stop_counting() {
    let mut b = Ballots::default();
    b.cast(10, uuid(1), E1, 0);
    // Node 2 reported committing past 10: an implicit success; node 3 has not answered.
    let members = [voter(1, 9), voter(2, 12), voter(3, 9)];
    assert!(b.recount(&members).is_empty(), "1:1 with one missing");
    // Node 3 leaves the view: 1:1, success wins the tie.
    let d = b.recount(&members[..2]);
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].seqno, d[0].winner, d[0].voters), (10, SUCCESS, 2));
    assert_eq!(b.decision(10), Some(SUCCESS));
    assert!(b.open.is_empty());
    assert_eq!(b.cast(10, uuid(3), E1, 0), Cast::Late { winner: SUCCESS });
}

#[test]
fn members_not_in_step_are_not_waited_for_unless_they_voted() {
    let mut b = Ballots::default();
    b.cast(10, uuid(1), E1, 0);
    b.cast(10, uuid(2), E1, 0);
    let joiner = Voter { uuid: uuid(3), eligible: false, committed: 4 };
    let d = b.recount(&[voter(1, 9), voter(2, 9), joiner, voter(4, 9)]);
    assert_eq!(d[0].winner, E1, "2 of 3 voters; the joiner does not count");
    assert_eq!(d[0].voters, 3);
}

#[test]
fn decisions_are_bounded() {
    let mut b = Ballots::default();
    for s in 0..(KEEP_DECIDED as Seqno + 10) {
        b.cast(s, uuid(1), E1, 0);
        b.recount(&[voter(1, -1)]);
    }
    assert_eq!(b.decided.len(), KEEP_DECIDED);
    assert_eq!(b.decided.keys().next(), Some(&10));
}

fn ballots_with(seqno: Seqno, votes: &[(u8, Code)], decided: Option<Code>) -> Ballots {
    let mut b = Ballots::default();
    match decided {
        Some(w) => {
            b.decided.insert(seqno, w);
        }
        None => {
            b.open.insert(seqno, Ballot { votes: votes.iter().map(|&(n, c)| (uuid(n), c)).collect(), policy: 0 });
        }
    }
    b.generation = 1;
    b
}

#[test]
fn a_node_answers_a_vote_once_it_has_applied_the_seqno() {
    let mut mine = MyVotes::default();
    assert!(mine.observe(&ballots_with(10, &[(1, E1)], None)));
    assert_eq!(mine.step(uuid(2), 9, true, 100), vec![], "not applied yet");
    assert_eq!(
        mine.step(uuid(2), 10, true, 200),
        vec![VoteAction::Submit { seqno: 10, code: SUCCESS, reason: String::new(), policy: 0 }]
    );
    assert_eq!(mine.step(uuid(2), 11, true, 300), vec![], "answered once");
    // The group decided for the failure: this node, which succeeded, is out.
    mine.observe(&Ballots { generation: 2, ..ballots_with(10, &[], Some(E1)) });
    assert_eq!(
        mine.step(uuid(2), 11, true, 400),
        vec![VoteAction::Inconsistent { seqno: 10, mine: SUCCESS, winner: E1 }]
    );
    assert_eq!(mine.step(uuid(2), 11, true, 500), vec![], "settled once");
}

#[test]
fn a_failure_is_voted_until_seen_and_checked_against_the_decision() {
    let mut mine = MyVotes::default();
    mine.failed(10, E1, "boom".into());
    let sent = VoteAction::Submit { seqno: 10, code: E1, reason: "boom".into(), policy: 0 };
    assert_eq!(mine.step(uuid(1), 9, true, 100), vec![sent.clone()]);
    assert_eq!(mine.step(uuid(1), 9, true, 200), vec![], "not yet due again");
    assert_eq!(mine.step(uuid(1), 9, true, 100 + RESEND_EVERY_MS), vec![sent], "lost? again");
    mine.observe(&ballots_with(10, &[(1, E1)], None));
    assert_eq!(mine.step(uuid(1), 9, true, 100 + 3 * RESEND_EVERY_MS), vec![], "ordered: no more resends");
    mine.observe(&Ballots { generation: 2, ..ballots_with(10, &[], Some(E1)) });
    assert_eq!(mine.step(uuid(1), 9, true, 0), vec![], "the majority failed alike: consistent");
    assert_eq!(mine.decision(10), Some(E1));
    assert!(!mine.active());
}

#[test]
fn a_lone_failure_makes_the_node_inconsistent() {
    let mut mine = MyVotes::default();
    mine.observe(&ballots_with(10, &[], Some(SUCCESS)));
    mine.failed(10, E1, "dup".into());
    assert_eq!(mine.step(uuid(1), 9, true, 0), vec![VoteAction::Inconsistent { seqno: 10, mine: E1, winner: SUCCESS }]);
}

#[test]
fn replayed_history_and_skipped_seqnos_are_consistent() {
    let mut mine = MyVotes::default();
    mine.observe(&ballots_with(10, &[], Some(E1)));
    assert_eq!(mine.step(uuid(2), 50, false, 0), vec![], "a decision in history this process never answered");
    let mut mine = MyVotes::default();
    mine.observe(&ballots_with(10, &[], Some(E1)));
    mine.skipped(10);
    assert_eq!(mine.step(uuid(2), 10, true, 0), vec![], "skipped as the group decided");
    // Not yet applied: nothing to say until the applier gets there.
    let mut mine = MyVotes::default();
    mine.observe(&ballots_with(10, &[], Some(SUCCESS)));
    assert_eq!(mine.step(uuid(2), 5, true, 0), vec![]);
    assert!(mine.active(), "the decision waits for this node's outcome");
    assert_eq!(mine.step(uuid(2), 10, true, 0), vec![], "applied fine, as the group");
    assert!(!mine.active());
}

#[test]
fn a_decision_that_came_before_the_local_statement_ended_still_counts() {
    let mut mine = MyVotes::default();
    mine.observe(&ballots_with(10, &[], Some(E1)));
    assert_eq!(mine.step(uuid(4), 9, true, 0), vec![], "our TOI statement is still running");
    assert!(mine.active(), "so the tick keeps checking");
    assert_eq!(
        mine.step(uuid(4), 10, true, 100),
        vec![VoteAction::Inconsistent { seqno: 10, mine: SUCCESS, winner: E1 }]
    );
}

#[test]
fn decisions_on_seqnos_that_came_with_a_state_transfer_are_not_this_nodes() {
    let mut mine = MyVotes::default();
    mine.observe(&ballots_with(10, &[], Some(E1)));
    mine.applies_after(4);
    assert_eq!(mine.step(uuid(4), 4, true, 0), vec![], "the transfer is not in yet");
    mine.applies_after(30); // the state transfer brought everything up to 30
    assert_eq!(mine.step(uuid(4), 30, true, 0), vec![], "the donor's data, not ours");
    assert!(!mine.active());
}
