//! The reader against files laid out as Galera 4 writes them, built here
//! from the layout in the module's comment.

use super::*;

const CC: i8 = TYPE_CONFIGURATION_CHANGE;
const WS: i8 = TYPE_WRITESET;
const GID: &str = "046c5c42-ec6c-11f1-923a-ee5ae4840b9f";

fn header(seqno: i64, size: u32, action: i8) -> Vec<u8> {
    let mut h = Vec::with_capacity(24);
    h.extend_from_slice(&seqno.to_le_bytes());
    h.extend_from_slice(&0xdead_beef_u64.to_le_bytes()); // ctx: a stale pointer
    h.extend_from_slice(&size.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes()); // released
    h.push(STORE_IN_RING as u8);
    h.push(action as u8);
    h
}

/// A ring of `ring_bytes` with `buffers` (seqno, type, size) written from
/// `first`, wrapping to the ring's start when they reach its end.
fn cache(preamble: &str, first: u64, ring_bytes: u64, buffers: &[(i64, i8, u32)]) -> Vec<u8> {
    let mut file = preamble.as_bytes().to_vec();
    file.resize(RING_START as usize + ring_bytes as usize + 24, 0);
    let mut at = first as usize;
    for &(seqno, action, size) in buffers {
        if at + size as usize + 24 > RING_START as usize + ring_bytes as usize {
            at = RING_START as usize; // the ring's end is left zeroed
        }
        file[at..at + 24].copy_from_slice(&header(seqno, size, action));
        file[at + 24..at + size as usize].fill(0x5a);
        at += size as usize;
    }
    file
}

fn preamble(synced: bool, offset: u64) -> String {
    format!("Version: 2\nGID: {GID}\nseqno_min: 1\nseqno_max: 27\noffset: {offset}\nsynced: {}\n", synced as u8)
}

fn read(bytes: &[u8]) -> Result<GaleraRing, String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("galera.cache");
    std::fs::write(&path, bytes).unwrap();
    read_galera_ring(&path)
}

/// Three nodes stopped one after the other: the last two seqnos are the
/// departures, configuration changes; below them, write-sets.
fn clean_stop() -> Vec<(i64, i8, u32)> {
    let mut b = vec![(1, CC, 232), (2, CC, 232), (3, CC, 232)];
    b.extend((4..=25).map(|s| (s, WS, 480)));
    b.extend([(26, CC, 232), (27, CC, 160)]);
    b
}

#[test]
fn departures_after_the_last_write_set_are_configuration_changes() {
    let ring = read(&cache(&preamble(true, RING_START), RING_START, 1 << 16, &clean_stop())).unwrap();
    assert_eq!(ring.gid, GID);
    assert!(ring.synced);
    assert_eq!(ring.actions.len(), 27);
    assert_eq!(ring.actions[&26], RingAction::ConfigurationChange);
    assert_eq!(ring.actions[&25], RingAction::WriteSet);
    assert_eq!(ring.last_write_at_or_below(27), 25);
    assert_eq!(ring.last_write_at_or_below(26), 25);
    assert_eq!(ring.last_write_at_or_below(25), 25);
    assert_eq!(ring.last_write_at_or_below(3), 0, "configuration changes all the way down");
}

#[test]
fn a_seqno_the_cache_does_not_hold_counts_as_data() {
    let ring = read(&cache(&preamble(true, RING_START), RING_START, 1 << 16, &clean_stop())).unwrap();
    assert_eq!(ring.last_write_at_or_below(30), 30, "beyond the cache");
    let mut gap = clean_stop();
    gap.retain(|&(s, _, _)| s != 26);
    let ring = read(&cache(&preamble(true, RING_START), RING_START, 1 << 16, &gap)).unwrap();
    assert_eq!(ring.last_write_at_or_below(27), 26, "26 is missing: it may have been a write-set");
}

#[test]
fn a_wrapped_ring_is_read_in_both_parts() {
    // A ring too small for all: the oldest buffers start late in the ring,
    // the newest wrap to its start.
    let buffers: Vec<_> = clean_stop().into_iter().filter(|&(s, _, _)| s >= 10).collect();
    let first = RING_START + 12288;
    let file = cache(&preamble(true, first), first, 16384, &buffers);
    assert_eq!(i64::from_le_bytes(file[RING_START as usize..][..8].try_into().unwrap()), 18, "wrapped");
    let ring = read(&file).unwrap();
    assert_eq!(ring.actions.keys().copied().collect::<Vec<_>>(), (10..=27).collect::<Vec<_>>());
    assert_eq!(ring.last_write_at_or_below(27), 25);
}

#[test]
fn an_unclean_cache_says_nothing() {
    let ring = read(&cache(&preamble(false, RING_START), RING_START, 1 << 16, &clean_stop())).unwrap();
    assert!(!ring.synced);
    assert!(ring.actions.is_empty());
    assert_eq!(ring.last_write_at_or_below(27), 27);
}

#[test]
fn the_same_seqno_twice_counts_as_data() {
    let mut twice = clean_stop();
    twice.push((26, CC, 232));
    let ring = read(&cache(&preamble(true, RING_START), RING_START, 1 << 16, &twice)).unwrap();
    assert_eq!(ring.actions[&26], RingAction::WriteSet);
    assert_eq!(ring.last_write_at_or_below(27), 26);
}

#[test]
fn a_damaged_buffer_ends_the_walk() {
    let mut file = cache(&preamble(true, RING_START), RING_START, 1 << 16, &clean_stop());
    // The header of seqno 26 (after 3 configuration changes and 22 write-sets).
    let at = RING_START as usize + 3 * 232 + 22 * 480;
    assert_eq!(i64::from_le_bytes(file[at..at + 8].try_into().unwrap()), 26);
    file[at + 22] = 7; // store: not the ring
    let ring = read(&file).unwrap();
    assert_eq!(ring.actions.len(), 25);
    assert_eq!(ring.last_write_at_or_below(27), 27);
    // A size that runs past the end of the file.
    let mut file = cache(&preamble(true, RING_START), RING_START, 1 << 16, &clean_stop());
    file[at + 16..at + 20].copy_from_slice(&(1u32 << 30).to_le_bytes());
    assert_eq!(read(&file).unwrap().actions.len(), 25);
}

#[test]
fn other_files_are_refused_with_the_reason() {
    let err = read(b"not a cache").unwrap_err();
    assert!(err.contains("no preamble"), "{err}");
    let err = read(&vec![0xff; 4096]).unwrap_err();
    assert!(err.contains("not text"), "{err}");
    let err = read(&cache("Hello: world\n", RING_START, 1024, &[])).unwrap_err();
    assert!(err.contains("no 'Version:'"), "{err}");
    let err = read(&cache(&preamble(true, RING_START).replace("Version: 2", "Version: 1"), RING_START, 1024, &[]))
        .unwrap_err();
    assert!(err.contains("version 1"), "{err}");
    let err = read(&cache(&preamble(true, 1 << 40), RING_START, 1024, &[])).unwrap_err();
    assert!(err.contains("outside the ring"), "{err}");
    let err = read_galera_ring(Path::new("/nonexistent/galera.cache")).unwrap_err();
    assert!(err.contains("No such file"), "{err}");
}
