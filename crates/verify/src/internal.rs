//! Internal consistency: a transaction sees its own work. A read of a key
//! it read before shows that list with its own appends since at the end;
//! a first read shows its own appends so far at the end. Only acknowledged
//! transactions are judged: a client whose transaction failed or got no
//! answer may not have all of its reads.

use std::collections::BTreeMap;

use crate::history::{History, Key, Op, Outcome, Value};
use crate::report::{Kind, Report};

#[derive(Default)]
struct Seen {
    /// The whole list, once the transaction has read the key.
    read: Option<Vec<Value>>,
    /// Its own appends since (or since its start).
    own: Vec<Value>,
}

pub fn check(history: &History, report: &mut Report) {
    for txn in history.txns.iter().filter(|t| t.outcome == Outcome::Ok) {
        let mut keys: BTreeMap<Key, Seen> = BTreeMap::new();
        for op in &txn.ops {
            match op {
                Op::Append { key, value } => keys.entry(*key).or_default().own.push(*value),
                Op::Read { key, values, .. } => {
                    let seen = keys.entry(*key).or_default();
                    if let Some(why) = disagreement(seen, values) {
                        report.add(
                            Kind::Internal,
                            vec![txn.id],
                            format!("txn {} read key {key} ({} values): {why}", txn.id, values.len()),
                        );
                    }
                    *seen = Seen { read: Some(values.clone()), own: vec![] };
                }
            }
        }
    }
}

/// Why `values` is not what the transaction's own work says it must be,
/// in terms of the values that differ (a hot key's list runs to thousands).
fn disagreement(seen: &Seen, values: &[Value]) -> Option<String> {
    match &seen.read {
        Some(before) => {
            let expected: Vec<Value> = before.iter().chain(&seen.own).copied().collect();
            (values != expected.as_slice()).then(|| {
                let extra: Vec<Value> = values.iter().filter(|v| !expected.contains(v)).copied().collect();
                let missing: Vec<Value> = expected.iter().filter(|v| !values.contains(v)).copied().collect();
                format!(
                    "not its earlier read ({} values) and its own appends {:?} since: it has {extra:?} besides, \
                     lacks {missing:?}",
                    before.len(),
                    seen.own
                )
            })
        }
        None => (!values.ends_with(&seen.own)).then(|| {
            let tail = &values[values.len().saturating_sub(seen.own.len() + 2)..];
            format!("its own appends {:?} are not at the end, which is {tail:?}", seen.own)
        }),
    }
}
