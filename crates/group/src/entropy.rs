//! The group's random draws: member ids and uuids here, openraft's
//! election timeouts through `raft::runtime`. From the operating system,
//! or, on a thread a simulation seeded, from that seed alone, so that a
//! run replays bit for bit (docs/simulation.md). A leaf: imports nothing
//! of the crate.

use std::cell::RefCell;

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

thread_local! {
    /// Set by [`seed_this_thread`]; `None`: draw from the OS.
    static SEEDED: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

/// From now on, every draw on this thread comes from `seed` (`None`: from
/// the OS again). A simulation steps all its hosts on one thread, so one
/// seed there fixes every draw of every member.
pub fn seed_this_thread(seed: Option<u64>) {
    SEEDED.with(|s| *s.borrow_mut() = seed.map(StdRng::seed_from_u64));
}

/// Whether this thread draws from a seed.
pub fn seeded() -> bool {
    SEEDED.with(|s| s.borrow().is_some())
}

pub fn next_u64() -> u64 {
    SEEDED.with(|s| s.borrow_mut().as_mut().map(RngCore::next_u64)).unwrap_or_else(rand::random)
}

pub fn fill_bytes(dst: &mut [u8]) {
    let drawn = SEEDED.with(|s| s.borrow_mut().as_mut().map(|rng| rng.fill_bytes(dst)));
    if drawn.is_none() {
        rand::thread_rng().fill_bytes(dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seeded_thread_draws_the_same_sequence_again() {
        let draw = || {
            (next_u64(), next_u64(), {
                let mut b = [0u8; 8];
                fill_bytes(&mut b);
                b
            })
        };
        seed_this_thread(Some(7));
        let first = draw();
        seed_this_thread(Some(7));
        assert_eq!(draw(), first);
        seed_this_thread(Some(8));
        assert_ne!(draw(), first);
        seed_this_thread(None);
        assert!(!seeded());
        assert_ne!(draw(), draw(), "the OS's draws");
    }
}
