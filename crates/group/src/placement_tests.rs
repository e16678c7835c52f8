use super::*;

fn voter(id: MemberId, segment: u8, weight: u32) -> Voter {
    Voter { id, segment, weight, pin: None }
}

fn pinned(v: Voter, pin: u8) -> Voter {
    Voter { pin: Some(pin), ..v }
}

#[test]
fn home_is_the_heaviest_site() {
    // 2+1: site 0 holds two votes wherever the leader is.
    let two_one = [voter(1, 0, 1), voter(2, 0, 1), voter(3, 1, 1)];
    assert_eq!(home(&two_one, 1), Some(0));
    assert_eq!(home(&two_one, 0), Some(0));
    // Weight, not heads: one heavy member outweighs two.
    let heavy = [voter(1, 0, 1), voter(2, 0, 1), voter(3, 1, 3)];
    assert_eq!(home(&heavy, 0), Some(1));
    assert_eq!(home(&[], 0), None);
}

#[test]
fn a_tie_keeps_the_leader_where_it_is() {
    // 2+2+1: sites 0 and 1 tie.
    let v = [voter(1, 0, 1), voter(2, 0, 1), voter(3, 1, 1), voter(4, 1, 1), voter(5, 2, 1)];
    assert_eq!(home(&v, 1), Some(1));
    assert_eq!(home(&v, 0), Some(0));
    assert_eq!(home(&v, 2), Some(0), "not among the heaviest: the lowest of them");
}

#[test]
fn a_pin_wins_when_its_site_has_a_voter() {
    let v = [pinned(voter(1, 0, 1), 1), pinned(voter(2, 0, 1), 1), pinned(voter(3, 1, 1), 1)];
    assert_eq!(home(&v, 0), Some(1));
    // A pin to a site with no voter is ignored: the weights decide.
    let v = [pinned(voter(1, 0, 1), 7), voter(2, 0, 1), voter(3, 1, 1)];
    assert_eq!(home(&v, 1), Some(0));
    // Pins that disagree: the one named by more weight, then the lowest.
    // (Each pin counts its voter's weight and one, so weight 0 pins too.)
    let v = [pinned(voter(1, 0, 1), 1), pinned(voter(2, 0, 4), 0), pinned(voter(3, 1, 1), 1)];
    assert_eq!(home(&v, 1), Some(0), "4 + 1 against (1 + 1) + (1 + 1)");
    let v = [pinned(voter(1, 0, 1), 1), pinned(voter(2, 0, 2), 0), pinned(voter(3, 1, 1), 1)];
    assert_eq!(home(&v, 0), Some(1), "(1 + 1) + (1 + 1) against 2 + 1");
    let v = [pinned(voter(1, 0, 1), 1), pinned(voter(3, 1, 1), 0)];
    assert_eq!(home(&v, 1), Some(0), "a tie of pins: the lowest");
}

#[test]
fn every_leader_agrees_on_home() {
    // Whichever member leads, the home it computes names the same site,
    // except on a tie, where each keeps it: no leader moves it back.
    let v = [voter(1, 0, 1), voter(2, 0, 1), voter(3, 1, 1), voter(4, 2, 2)];
    let homes: Vec<_> = v.iter().map(|l| home(&v, l.segment)).collect();
    assert_eq!(homes, vec![Some(0), Some(0), Some(0), Some(2)]);
    for h in homes.into_iter().flatten() {
        assert_eq!(home(&v, h), Some(h), "a leader moved to {h} stays there");
    }
}

fn candidate(id: MemberId, segment: u8, behind: u64, heard_ms: Option<u64>) -> Candidate {
    Candidate { id, segment, behind, heard: heard_ms.map(Duration::from_millis) }
}

#[test]
fn the_successor_is_a_live_near_voter_of_home() {
    let live = Duration::from_millis(200);
    let c = [candidate(1, 0, 5, Some(10)), candidate(2, 0, 1, Some(10)), candidate(3, 1, 0, Some(10))];
    assert_eq!(successor(0, 1, &c, live, 64), Some(2), "the least behind in home");
    assert_eq!(successor(1, 1, &c, live, 64), None, "already home");
    let c = [candidate(1, 0, 0, Some(300)), candidate(2, 0, 0, None), candidate(4, 0, 65, Some(1))];
    assert_eq!(successor(0, 1, &c, live, 64), None, "quiet, never heard, or far behind: none");
    let c = [candidate(5, 0, 3, Some(1)), candidate(4, 0, 3, Some(1))];
    assert_eq!(successor(0, 1, &c, live, 64), Some(4), "a tie: the lowest id");
}
