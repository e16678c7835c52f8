//! Random sequences of append / truncate_after / purge_upto / sync / reopen / reads on
//! MemStorage match a simple in-memory model after every step.

mod common;

use common::model::{op, run, Op};
use proptest::prelude::*;
use tandem_gcache::MemStorage;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Small segments, so that rollover, segment-granular purge and truncation across
    /// segment files happen in most runs.
    #[test]
    fn log_matches_model_with_small_segments(ops in proptest::collection::vec(op(), 1..60)) {
        run(MemStorage::new(), 300, &ops);
    }

    #[test]
    fn log_matches_model_with_large_segments(ops in proptest::collection::vec(op(), 1..60)) {
        run(MemStorage::new(), 1 << 20, &ops);
    }

    /// Every record its own segment: the extreme of rollover.
    #[test]
    fn log_matches_model_with_one_record_per_segment(
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        run(MemStorage::new(), 0, &ops);
    }
}

/// A fixed sequence touching each operation, so that a regression shows without proptest's
/// luck.
#[test]
fn a_scripted_sequence_matches_the_model() {
    let append = |sizes: Vec<usize>| Op::Append { start: 10, sizes };
    let ops = vec![
        append(vec![5; 10]),
        Op::Sync,
        append(vec![100; 10]),
        Op::PurgeUpto(4),
        Op::TruncateAfter(Some(3)),
        Op::Reopen,
        append(vec![0, 1, 2]),
        Op::AppendOutOfOrder { skew: 2 },
        Op::PurgeUpto(1000),
        Op::Reopen,
        Op::TruncateAfter(None),
        append(vec![7; 3]),
        Op::Reopen,
    ];
    run(MemStorage::new(), 300, &ops);
}
