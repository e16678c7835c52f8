//! Negative tests of the group simulation (feature `negative-tests`): each
//! puts a defect back into the production code (`tandem_group::injected`)
//! and needs some seed of `1..=NEGATIVE_SEEDS` to fail a scenario.

use tandem_group::injected::{inject, Defect};

use super::*;

/// Seeds a negative test may take to catch its defect.
const NEGATIVE_SEEDS: u64 = 8;

/// The checks bite: with the loss of issue 44 put back (a leader handing
/// its leadership over appends what followers forward, and its Raft core
/// drops it), a run of some seed fails. Prints the seed that caught it.
#[test]
fn the_checks_catch_a_leader_that_takes_forwards_while_handing_over() {
    caught_within_bound(Defect::HandOverTakesForwards, hand_over_under_load);
}

/// With the forwarding link's watch switched off, a flaky network leaves a
/// follower writing into a dead connection: nothing more is ordered.
#[test]
fn the_checks_catch_a_forwarding_link_that_swallows_payloads() {
    caught_within_bound(Defect::ForwardLinkNeverStalls, flaky_links_under_load);
}

/// With a hand-back keyed on the term alone, a follower evicted and taken
/// back by the same leader forwards nothing to it any more.
#[test]
fn the_checks_catch_a_follower_that_passes_over_the_leader_that_took_it_back() {
    caught_within_bound(Defect::HandBackKeyedOnTermOnly, follower_held_and_taken_back);
}

/// With a read barrier that does not ask the leader, a follower answers a
/// causal read from before a commit another member acknowledged.
#[test]
fn the_checks_catch_a_causal_read_that_does_not_ask_the_leader() {
    caught_within_bound(Defect::FollowerReadsItsOwnIndex, hand_over_under_load);
}

/// With a connection that takes forwards again after handing some back, a
/// follower evicted and taken back has its payloads ordered out of turn.
#[test]
fn the_checks_catch_a_leader_that_takes_forwards_after_handing_back() {
    caught_within_bound(Defect::TakesForwardsAfterHandingBack, follower_held_and_taken_back);
}

/// With appends acknowledged before they are fsynced, a power cut of the
/// whole group takes entries that were committed and applied.
#[test]
fn the_checks_catch_a_log_that_acknowledges_before_the_fsync() {
    caught_within_bound(Defect::AcknowledgesBeforeSync, group_lost_power_under_load);
}

/// With a snapshot installed from the leader left off the member's disk,
/// the follower taken back by one cannot resume from its disk after a
/// kill -9.
#[test]
fn the_checks_catch_a_member_that_forgets_an_installed_snapshot() {
    caught_within_bound(Defect::ForgetsInstalledSnapshot, follower_behind_the_purge);
}

/// With a leader that counts the time its own clock jumped as its members'
/// silence, it evicts members that are fine, and what they forwarded is
/// lost.
#[test]
fn the_checks_catch_a_leader_that_counts_its_own_stall_as_silence() {
    caught_within_bound(Defect::CountsItsOwnStallAsSilence, sim_clocks::clock_jumps_under_load);
}

/// Runs `scenario` with `defect` put back, seed after seed, until one fails;
/// the test fails if none of 1..=NEGATIVE_SEEDS does. Prints the seed.
fn caught_within_bound(defect: Defect, scenario: Scenario) {
    common::init_logging();
    let caught = (1..=NEGATIVE_SEEDS).find(|&seed| {
        inject(Some(defect));
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| scenario(seed)));
        inject(None);
        run.is_err()
    });
    let seed = caught.unwrap_or_else(|| panic!("no seed of 1..={NEGATIVE_SEEDS} caught {defect:?}"));
    eprintln!("{defect:?} was caught with seed {seed}");
}
