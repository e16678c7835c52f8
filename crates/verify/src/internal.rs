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
                            format!("txn {} read key {key} as {values:?}: {why}", txn.id),
                        );
                    }
                    *seen = Seen { read: Some(values.clone()), own: vec![] };
                }
            }
        }
    }
}

fn disagreement(seen: &Seen, values: &[Value]) -> Option<String> {
    match &seen.read {
        Some(before) => {
            let expected: Vec<Value> = before.iter().chain(&seen.own).copied().collect();
            (values != expected.as_slice())
                .then(|| format!("expected {expected:?} from its own earlier read and appends"))
        }
        None => (!values.ends_with(&seen.own)).then(|| format!("its own appends {:?} are not at the end", seen.own)),
    }
}
