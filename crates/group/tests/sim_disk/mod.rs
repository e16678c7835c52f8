//! Disks in the simulation: a power cut's tears, drawn from the seed.

use tandem_gcache::MemStorage;

/// `disk` as a power cut now leaves it (`MemStorage::crash`): each file's
/// writes since its last fsync torn at a point `draw` picks, from none of
/// them kept to all. Returns it and the bytes the tears took.
pub fn power_cut(disk: &MemStorage, draw: &mut dyn FnMut() -> u64) -> (MemStorage, u64) {
    let mut torn = 0;
    let after = disk.crash(&mut |_, synced, len| {
        let kept = synced + draw() % (len - synced + 1);
        torn += len - kept;
        kept
    });
    (after, torn)
}

/// A seeded stream of draws for the tears of a power cut (splitmix64).
pub fn tear_draws(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed ^ 0x5DEE_CE66_D1CE_4E5B;
    move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
