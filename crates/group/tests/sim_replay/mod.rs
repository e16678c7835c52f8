//! Replay: a seed gives the same run, bit for bit, every time.

use super::*;

/// The same seed, run twice, gives the same run, in every scenario.
#[test]
fn a_seed_replays_the_same_run() {
    common::init_logging();
    let seed = seeds()[0];
    let scenarios: [(&str, Scenario); 15] = [
        ("hand-over", hand_over_under_load),
        ("cut-off leader", leader_cut_off_under_load),
        ("killed follower", follower_killed_under_load),
        ("follower without power", follower_lost_power_under_load),
        ("killed leader", leader_killed_under_load),
        ("crashed group", group_crashed_under_load),
        ("group without power", group_lost_power_under_load),
        ("flaky links", flaky_links_under_load),
        ("held follower", follower_held_and_taken_back),
        ("follower behind the purge", follower_behind_the_purge),
        ("leader writing, killed", super::sim_leader_writes::leader_writing_killed),
        ("clock jumps", sim_clocks::clock_jumps_under_load),
        ("leader on a slow clock, cut off", sim_clocks::leader_cut_off_on_a_slow_clock),
        ("member cut off leaves", super::sim_leave::cut_off_member_leaves),
        ("donor killed mid catch-up", super::sim_catch_up::donor_killed_mid_catch_up),
    ];
    for (name, scenario) in scenarios {
        let (first, second) = (scenario(seed), scenario(seed));
        assert_eq!(first.submitted, second.submitted, "{name}, seed {seed}: payloads submitted");
        assert_eq!(first.elapsed, second.elapsed, "{name}, seed {seed}: simulated time");
        assert!(first == second, "{name}, seed {seed}: the two runs applied different histories");
    }
}
