//! The simulation's checks of what members applied: each writer's payloads
//! as a member applied them, the promise a scenario makes of them, and one
//! history on every member.

use std::collections::BTreeMap;

use super::common::{Event, Recording};

/// Each writer's payloads in the order one member applied them.
pub fn per_writer(rec: &Recording) -> BTreeMap<usize, Vec<usize>> {
    let mut seen: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (_, p) in rec.messages() {
        let text = String::from_utf8(p).expect("a test payload");
        let (writer, n) = text.split_once(':').expect("writer:n");
        seen.entry(writer.parse().unwrap()).or_default().push(n.parse().unwrap());
    }
    seen
}

/// What a scenario promises of the writer's payloads in every history.
#[derive(Clone, Copy)]
pub enum Promise {
    /// Each once, in submission order, none missing.
    EveryPayloadOnce,
    /// Rising, each at most once: some may be lost with a failed leader.
    Rising,
}

/// `promise` holds for writer `w`'s payloads (`submitted` of them taken by
/// the group) in what each member applied (`recs`, one per member).
pub fn check_promise(seed: u64, recs: &[Recording], w: usize, submitted: usize, promise: Promise) {
    for (i, rec) in recs.iter().enumerate() {
        let seen = per_writer(rec).remove(&w).unwrap_or_default();
        match promise {
            Promise::EveryPayloadOnce => {
                let gaps: Vec<(usize, usize)> =
                    seen.windows(2).filter(|w| w[1] != w[0] + 1).map(|w| (w[0], w[1])).collect();
                assert!(
                    seen.first() == Some(&0) && gaps.is_empty() && seen.len() == submitted,
                    "seed {seed}, member {i}, writer {w}: every payload once, in order; {} of {submitted}, breaks \
                     after/before {gaps:?}",
                    seen.len()
                );
            }
            Promise::Rising => {
                let falls: Vec<(usize, usize)> =
                    seen.windows(2).filter(|w| w[1] <= w[0]).map(|w| (w[0], w[1])).collect();
                assert!(
                    falls.is_empty(),
                    "seed {seed}, member {i}, writer {w}: its payloads rise; they fall at {falls:?}"
                );
            }
        }
    }
}

/// All members applied the same history; else, where the first two that
/// differ part, with the events around it.
pub fn same_histories(seed: u64, histories: &[Vec<Event>]) {
    for (i, h) in histories.iter().enumerate().skip(1) {
        let first = &histories[0];
        let Some(at) = (0..first.len().max(h.len())).find(|&k| first.get(k) != h.get(k)) else { continue };
        let around = |h: &[Event]| h[at.saturating_sub(2)..(at + 3).min(h.len())].to_vec();
        panic!(
            "seed {seed}: members 0 and {i} applied different histories ({} and {} events), from event {at}:\n{:?}\n{:?}",
            first.len(),
            h.len(),
            around(first),
            around(h)
        );
    }
}
