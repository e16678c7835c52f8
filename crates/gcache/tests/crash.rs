//! A crash at ANY byte: after random appends, syncs, truncations and purges, MemStorage
//! loses power with every unsynced file cut at a point proptest draws (and a drawn number of
//! unsynced directory operations kept). Reopening must give exactly a contiguous run of what
//! was appended, containing everything that was synced and not purged; never a panic, never
//! bytes that were not appended at that index.

mod common;

use common::{append_all, assert_matches_history, options, payload, History};
use proptest::prelude::*;
use proptest::sample::Index;
use tandem_gcache::{Damage, MemStorage, SegmentLog, Storage};

#[derive(Clone, Debug)]
enum Step {
    Append(Vec<usize>),
    Sync,
    TruncateBack(u8),
    PurgeForward(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => proptest::collection::vec(0usize..60, 1..8).prop_map(Step::Append),
        3 => Just(Step::Sync),
        1 => (0u8..10).prop_map(Step::TruncateBack),
        1 => (0u8..10).prop_map(Step::PurgeForward),
    ]
}

/// What the log must still hold after a power loss.
struct Durable {
    /// Every record on disk, purged or not: anything reopened must match it.
    history: History,
    /// The logical first index (purged records may come back, never more may vanish).
    first: u64,
    /// Last index made durable by `sync` (or `truncate_after`, which syncs itself).
    synced_last: Option<u64>,
    /// The live log's last index when the steps ended: what a kill must keep.
    /// Not the history's last key: a truncation below the purge point leaves
    /// only purged records in the history, and an empty log.
    live_last: Option<u64>,
}

fn play(steps: &[Step], segment_bytes: u64) -> (MemStorage, Durable) {
    let storage = MemStorage::new();
    let mut log = SegmentLog::open(storage.clone(), options(segment_bytes)).unwrap().log;
    let mut durable = Durable { history: History::new(), first: 1, synced_last: None, live_last: None };
    for (generation, step) in steps.iter().enumerate() {
        match step {
            Step::Append(sizes) => {
                let start = log.last_index().map_or(1, |last| last + 1);
                let payloads: Vec<Vec<u8>> =
                    (0..sizes.len()).map(|i| payload(start + i as u64, sizes[i], generation as u64)).collect();
                append_all(&mut log, start, &payloads).unwrap();
                for (i, bytes) in payloads.into_iter().enumerate() {
                    durable.history.insert(start + i as u64, bytes);
                }
            }
            Step::Sync => {
                log.sync().unwrap();
                durable.synced_last = log.last_index();
            }
            Step::TruncateBack(back) => {
                let Some(last) = log.last_index() else {
                    continue;
                };
                let index = last.saturating_sub(u64::from(*back));
                if index + 1 < durable.first {
                    continue;
                }
                log.truncate_after(Some(index)).unwrap();
                durable.history.retain(|&k, _| k <= index);
                durable.synced_last = durable.synced_last.map(|s| s.min(index));
                if log.last_index().is_none() {
                    durable.synced_last = None;
                    durable.first = 1;
                }
            }
            Step::PurgeForward(forward) => {
                log.purge_upto(durable.first + u64::from(*forward)).unwrap();
                durable.first = log.first_index().unwrap_or(1);
            }
        }
    }
    durable.live_last = log.last_index();
    (storage, durable)
}

/// Reopens the crashed storage and checks it against what must have survived.
fn check_reopened(crashed: MemStorage, durable: &Durable, segment_bytes: u64) {
    let opened = SegmentLog::open(crashed.clone(), options(segment_bytes)).unwrap();
    if let Some(Damage::Corrupt { segment, offset, reason }) = &opened.recovery.damage {
        panic!("a crash is never corruption: {segment} at {offset}: {reason}");
    }
    let range = assert_matches_history(&opened.log, &durable.history);
    if let Some(synced_last) = durable.synced_last.filter(|&s| s >= durable.first) {
        let (first, last) = range.expect("synced records survive");
        assert!(first <= durable.first, "first {first} above the purge point {}", durable.first);
        assert!(last >= synced_last, "lost synced records: last {last} < {synced_last}");
    }
    // A second open finds nothing more to repair: recovery is idempotent.
    let again = SegmentLog::open(crashed, options(segment_bytes)).unwrap();
    assert_eq!(again.recovery.damage, None);
    assert_eq!(again.log.last_index(), opened.log.last_index());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn power_loss_at_any_byte_recovers_a_prefix_with_everything_synced(
        steps in proptest::collection::vec(step(), 1..30),
        segment_bytes in prop_oneof![Just(0u64), 100u64..600, Just(1u64 << 20)],
        cuts in proptest::collection::vec(any::<Index>(), 1..8),
        dir_ops in any::<Index>(),
    ) {
        let (storage, durable) = play(&steps, segment_bytes);
        let mut next_cut = cuts.iter().cycle();
        let mut tear = |_: &str, synced: u64, current: u64| {
            let cut = next_cut.next().expect("cycle never ends");
            synced + cut.index((current - synced + 1) as usize) as u64
        };
        let kept = dir_ops.index(storage.pending_dir_ops() + 1);
        let crashed = storage.crash_keeping_dir_ops(kept, &mut tear);
        check_reopened(crashed, &durable, segment_bytes);
    }

    /// kill -9: the page cache survives, so every append that returned is there.
    #[test]
    fn kill_keeps_every_returned_append(
        steps in proptest::collection::vec(step(), 1..30),
        segment_bytes in prop_oneof![100u64..600, Just(1u64 << 20)],
    ) {
        let (storage, durable) = play(&steps, segment_bytes);
        let killed = storage.kill();
        let opened = SegmentLog::open(killed, options(segment_bytes)).unwrap();
        prop_assert_eq!(&opened.recovery.damage, &None);
        let range = assert_matches_history(&opened.log, &durable.history);
        prop_assert_eq!(range.map(|(_, last)| last), durable.live_last);
    }
}

/// Every cut point of the unsynced tail of a log that started several segments since its
/// last sync, crossed with every number of kept directory operations: exhaustive, not
/// sampled. Sealing fsyncs a segment, so only the last one may hold unsynced bytes.
#[test]
fn every_cut_point_of_the_unsynced_tail() {
    let steps = vec![
        Step::Append(vec![10; 6]),
        Step::Sync,
        Step::Append(vec![30; 5]),
        Step::Append(vec![0, 45, 7]),
        Step::Append(vec![20; 4]),
    ];
    let segment_bytes = 250;
    let (storage, durable) = play(&steps, segment_bytes);
    let unsynced: Vec<String> =
        storage.list().unwrap().into_iter().filter(|name| storage.synced_len(name) != storage.file_len(name)).collect();
    assert_eq!(unsynced.len(), 1, "only the last segment is unsynced: {unsynced:?}");
    assert!(storage.pending_dir_ops() >= 2, "the scenario starts segments after its sync");
    let mut checked = 0;
    for victim in &unsynced {
        let len = storage.file_len(victim).unwrap();
        let synced = storage.synced_len(victim).unwrap();
        for cut in synced..=len {
            for kept in 0..=storage.pending_dir_ops() {
                let mut tear = |name: &str, _: u64, current: u64| if name == victim { cut } else { current };
                check_reopened(storage.crash_keeping_dir_ops(kept, &mut tear), &durable, segment_bytes);
                checked += 1;
            }
        }
    }
    assert!(checked > 200, "{checked}");
}

/// Power loss right after a truncation and new appends: the truncated records must not come
/// back behind the new ones, at any cut of the new data.
#[test]
fn truncated_records_never_return_behind_new_ones() {
    let storage = MemStorage::new();
    let mut log = SegmentLog::open(storage.clone(), options(1 << 20)).unwrap().log;
    let old: Vec<Vec<u8>> = (1..=20).map(|i| payload(i, 16, 0)).collect();
    append_all(&mut log, 1, &old).unwrap();
    log.sync().unwrap();
    log.truncate_after(Some(10)).unwrap();
    let new: Vec<Vec<u8>> = (11..=15).map(|i| payload(i, 16, 1)).collect();
    append_all(&mut log, 11, &new).unwrap();
    let mut history: History = (1..=10).map(|i| (i, old[i as usize - 1].clone())).collect();
    history.extend((11..=15).map(|i| (i, new[i as usize - 11].clone())));
    let name = log.segments()[0].name.clone();
    let synced = storage.synced_len(&name).unwrap();
    for cut in synced..=storage.file_len(&name).unwrap() {
        let crashed = storage.crash(&mut |_: &str, _, _| cut);
        let opened = SegmentLog::open(crashed, options(1 << 20)).unwrap();
        let (_, last) = assert_matches_history(&opened.log, &history).unwrap();
        assert!((10..=15).contains(&last), "cut {cut}: last {last}");
    }
}
