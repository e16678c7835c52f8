//! A reference model of the log (a map from index to payload, a logical first index) and a
//! driver that applies the same random operations to the model and to a real log, on any
//! storage, comparing them after every step.

use super::{append_all, assert_matches_history, options, payload, History};
use proptest::prelude::*;
use proptest::sample::Index;
use tandem_gcache::{LogError, SegmentLog, Storage};

#[derive(Clone, Debug)]
pub enum Op {
    /// Records after the last one (or from `start` on an empty log).
    Append {
        start: u64,
        sizes: Vec<usize>,
    },
    /// One record at last + 1 + `skew` (never 0): must be refused.
    AppendOutOfOrder {
        skew: i8,
    },
    /// `None`: drop everything; `Some(back)`: keep up to last - back.
    TruncateAfter(Option<u16>),
    /// Purge up to first + `forward`.
    PurgeUpto(u16),
    Sync,
    Reopen,
    Read(Index),
    ReadRange {
        from: Index,
        to: Index,
        max_bytes: usize,
    },
}

pub fn op() -> impl Strategy<Value = Op> {
    let sizes = proptest::collection::vec(prop_oneof![8 => 0usize..40, 1 => 200usize..3000], 1..12);
    prop_oneof![
        8 => (1u64..50, sizes).prop_map(|(start, sizes)| Op::Append { start, sizes }),
        1 => (-3i8..=3)
            .prop_filter("a gap", |s| *s != 0)
            .prop_map(|skew| Op::AppendOutOfOrder { skew }),
        1 => Just(Op::TruncateAfter(None)),
        3 => (0u16..30).prop_map(|back| Op::TruncateAfter(Some(back))),
        3 => (0u16..40).prop_map(Op::PurgeUpto),
        3 => Just(Op::Sync),
        2 => Just(Op::Reopen),
        3 => any::<Index>().prop_map(Op::Read),
        2 => (any::<Index>(), any::<Index>(), 0usize..400)
            .prop_map(|(from, to, max_bytes)| Op::ReadRange { from, to, max_bytes }),
    ]
}

/// What the log should hold.
#[derive(Debug, Default)]
pub struct Model {
    /// Every record on disk, purged or not.
    pub history: History,
    /// First index not purged, while the log is not empty.
    pub first: Option<u64>,
    pub last: Option<u64>,
    /// Bumped at each append so that re-appended indexes get new bytes.
    generation: u64,
}

impl Model {
    fn clear(&mut self) {
        self.history.clear();
        self.first = None;
        self.last = None;
    }
}

/// Applies `ops` to a fresh log on `storage` and to the model, comparing after each.
pub fn run<S: Storage + Clone>(storage: S, segment_bytes: u64, ops: &[Op]) {
    let open = |storage: &S| {
        let opened = SegmentLog::open(storage.clone(), options(segment_bytes)).unwrap();
        assert_eq!(opened.recovery.damage, None, "a clean reopen finds no damage");
        opened.log
    };
    let mut log = open(&storage);
    let mut model = Model::default();
    for (step, op) in ops.iter().enumerate() {
        apply(&mut log, &mut model, op, || open(&storage));
        assert_eq!(log.first_index(), model.first, "first after step {step}: {op:?}");
        assert_eq!(log.last_index(), model.last, "last after step {step}: {op:?}");
        assert_matches_history(&log, &model.history);
        assert_disk_bytes(&log);
    }
}

fn assert_disk_bytes<S: Storage>(log: &SegmentLog<S>) {
    let mut total = 0;
    for info in log.segments() {
        assert_eq!(log.storage().len(&info.name).unwrap(), info.bytes, "{}", info.name);
        total += info.bytes;
    }
    assert_eq!(log.disk_bytes(), total);
}

fn apply<S: Storage>(log: &mut SegmentLog<S>, model: &mut Model, op: &Op, reopen: impl Fn() -> SegmentLog<S>) {
    match op {
        Op::Append { start, sizes } => {
            model.generation += 1;
            let start = model.last.map_or(*start, |last| last + 1);
            let payloads: Vec<Vec<u8>> =
                (0..sizes.len()).map(|i| payload(start + i as u64, sizes[i], model.generation)).collect();
            append_all(log, start, &payloads).unwrap();
            for (i, bytes) in payloads.into_iter().enumerate() {
                model.history.insert(start + i as u64, bytes);
            }
            model.first = model.first.or(Some(start));
            model.last = Some(start + sizes.len() as u64 - 1);
        }
        Op::AppendOutOfOrder { skew } => {
            let Some(last) = model.last else { return };
            let got = (last + 1).saturating_add_signed(i64::from(*skew));
            if got == last + 1 {
                return;
            }
            let error = log.append([(got, &b"x"[..])]).unwrap_err();
            assert!(matches!(error, LogError::NotContiguous { expected, got: g }
                    if expected == last + 1 && g == got));
        }
        Op::TruncateAfter(None) => {
            log.truncate_after(None).unwrap();
            model.clear();
        }
        Op::TruncateAfter(Some(back)) => truncate_after(log, model, *back),
        Op::PurgeUpto(forward) => {
            let (Some(first), Some(last)) = (model.first, model.last) else {
                log.purge_upto(u64::from(*forward)).unwrap();
                return;
            };
            let index = first + u64::from(*forward);
            log.purge_upto(index).unwrap();
            let index = index.min(last);
            if index >= first {
                model.first = Some(index + 1);
            }
        }
        Op::Sync => log.sync().unwrap(),
        Op::Reopen => {
            *log = reopen();
            assert_eq!(log.last_index(), model.last, "reopen keeps every record");
            // Purges are segment-granular on disk: the first index may come back lower.
            if let (Some(first), Some(reopened)) = (model.first, log.first_index()) {
                assert!(reopened <= first, "reopened first {reopened} above {first}");
            }
            model.first = log.first_index();
        }
        Op::Read(pick) => read(log, model, pick),
        Op::ReadRange { from, to, max_bytes } => read_range(log, model, from, to, *max_bytes),
    }
}

fn truncate_after<S: Storage>(log: &mut SegmentLog<S>, model: &mut Model, back: u16) {
    let (Some(first), Some(last)) = (model.first, model.last) else {
        log.truncate_after(Some(u64::from(back))).unwrap();
        return;
    };
    let index = last.saturating_sub(u64::from(back));
    let result = log.truncate_after(Some(index));
    if index >= last {
        result.unwrap();
    } else if index + 1 < first {
        assert!(matches!(result, Err(LogError::Missing(i)) if i == index), "{result:?}");
    } else {
        result.unwrap();
        model.history.retain(|&k, _| k <= index);
        model.last = Some(index);
        if log.last_index().is_none() {
            // Nothing at or below `index` was left on disk: the log is simply empty now.
            assert_eq!(index + 1, first);
            model.clear();
        }
    }
}

/// An index around the log: sometimes just outside it, to check `Missing`.
fn around(model: &Model, pick: &Index) -> u64 {
    let (first, last) = (model.first.unwrap_or(0), model.last.unwrap_or(0));
    let low = first.saturating_sub(2);
    low + pick.index((last + 3 - low) as usize) as u64
}

fn holds(model: &Model, index: u64) -> bool {
    matches!((model.first, model.last), (Some(f), Some(l)) if f <= index && index <= l)
}

fn read<S: Storage>(log: &SegmentLog<S>, model: &Model, pick: &Index) {
    let index = around(model, pick);
    match log.read(index) {
        Ok(bytes) => {
            assert!(holds(model, index), "read {index} outside the log");
            assert_eq!(Some(&bytes), model.history.get(&index));
        }
        Err(LogError::Missing(missing)) => {
            assert_eq!(missing, index);
            assert!(!holds(model, index), "{index} is in the log");
        }
        Err(error) => panic!("read {index}: {error}"),
    }
}

fn read_range<S: Storage>(log: &SegmentLog<S>, model: &Model, from: &Index, to: &Index, max: usize) {
    let (from, to) = (around(model, from), around(model, to));
    let result = log.read_range(from, to, max);
    if from > to {
        assert!(result.unwrap().is_empty());
        return;
    }
    if !holds(model, from) || !holds(model, to) {
        assert!(matches!(result, Err(LogError::Missing(_))), "{from}..={to}: {result:?}");
        return;
    }
    let records = result.unwrap();
    assert!(!records.is_empty(), "at least one record");
    let mut total = 0;
    for (offset, (index, bytes)) in records.iter().enumerate() {
        assert_eq!(*index, from + offset as u64);
        assert_eq!(Some(bytes), model.history.get(index));
        total += bytes.len();
    }
    assert!(records.len() == 1 || total <= max, "{total} bytes over {max}");
    let end = from + records.len() as u64 - 1;
    if end < to {
        let next = model.history[&(end + 1)].len();
        assert!(total + next > max, "stopped early at {end} with room for {}", end + 1);
    }
}
