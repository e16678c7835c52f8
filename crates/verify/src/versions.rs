//! Each key's order of versions, read off the lists themselves, and the
//! checks on single reads and on the final state.
//!
//! The order of a key is its longest observed list: every observation of
//! it must be a prefix of that one. Observations are the reads of
//! acknowledged transactions and the final reads; a transaction that got
//! no answer, or was rolled back, may have read anything.

use std::collections::{BTreeMap, BTreeSet};

use crate::history::{History, Key, Outcome, Value};
use crate::report::{Kind, Report};

/// Who appended a value: the transaction (its index in the history), and
/// whether it was that transaction's last append to the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Writer {
    pub txn: usize,
    pub last_of_txn: bool,
}

/// A list as one observer saw it: a transaction's read (`txn`) or a node's
/// final read (`node`).
#[derive(Clone, Debug)]
pub struct Observation<'h> {
    pub key: Key,
    pub values: &'h [Value],
    pub txn: Option<usize>,
    pub node: Option<usize>,
}

pub struct Versions<'h> {
    pub writers: BTreeMap<(Key, Value), Writer>,
    /// Each key's longest observed list.
    pub orders: BTreeMap<Key, Vec<Value>>,
    pub observations: Vec<Observation<'h>>,
}

impl<'h> Versions<'h> {
    pub fn index(history: &'h History, report: &mut Report) -> Versions<'h> {
        let writers = writers(history, report);
        let observations = observations(history);
        let mut orders: BTreeMap<Key, Vec<Value>> = BTreeMap::new();
        for o in &observations {
            let order = orders.entry(o.key).or_default();
            if o.values.len() > order.len() {
                *order = o.values.to_vec();
            }
        }
        Versions { writers, orders, observations }
    }

    /// The observation's list is a prefix of its key's order.
    pub fn is_prefix(&self, key: Key, values: &[Value]) -> bool {
        self.orders.get(&key).is_some_and(|order| order.starts_with(values))
    }

    pub fn writer(&self, key: Key, value: Value) -> Option<Writer> {
        self.writers.get(&(key, value)).copied()
    }
}

fn writers(history: &History, report: &mut Report) -> BTreeMap<(Key, Value), Writer> {
    let mut writers = BTreeMap::new();
    for (i, txn) in history.txns.iter().enumerate() {
        let appends: Vec<(Key, Value)> = txn.appends().collect();
        for (n, (key, value)) in appends.iter().enumerate() {
            let last_of_txn = !appends[n + 1..].iter().any(|(k, _)| k == key);
            if let Some(before) = writers.insert((*key, *value), Writer { txn: i, last_of_txn }) {
                let ids = vec![history.txns[before.txn].id, txn.id];
                report.add(Kind::DuplicateAppend, ids, format!("value {value} appended to key {key} twice"));
            }
        }
    }
    writers
}

fn observations(history: &History) -> Vec<Observation<'_>> {
    let mut out = vec![];
    for (i, txn) in history.txns.iter().enumerate().filter(|(_, t)| t.outcome == Outcome::Ok) {
        for op in &txn.ops {
            if let crate::history::Op::Read { key, values, .. } = op {
                out.push(Observation { key: *key, values, txn: Some(i), node: None });
            }
        }
    }
    for f in &history.final_reads {
        out.push(Observation { key: f.key, values: &f.values, txn: None, node: Some(f.node) });
    }
    out
}

/// Who an observation is, in a finding's words and ids.
fn observer(history: &History, o: &Observation<'_>) -> (String, Vec<u64>) {
    match (o.txn, o.node) {
        (Some(t), _) => (format!("txn {}", history.txns[t].id), vec![history.txns[t].id]),
        (None, Some(n)) => (format!("the final read on node {n}"), vec![]),
        (None, None) => ("a read".into(), vec![]),
    }
}

/// Duplicated, garbage, aborted and intermediate values, and lists that
/// are not a prefix of their key's order.
pub fn check_reads(history: &History, v: &Versions<'_>, report: &mut Report) {
    for o in &v.observations {
        let (who, ids) = observer(history, o);
        let mut seen = BTreeSet::new();
        for value in o.values {
            if !seen.insert(*value) {
                report.add(Kind::Duplicated, ids.clone(), format!("{who} read {value} twice in key {}", o.key));
            }
            match v.writer(o.key, *value) {
                None => report.add(
                    Kind::Garbage,
                    ids.clone(),
                    format!("{who} read {value} in key {}, never appended", o.key),
                ),
                Some(w) if history.txns[w.txn].outcome == Outcome::Aborted => {
                    let mut both = ids.clone();
                    both.push(history.txns[w.txn].id);
                    report.add(
                        Kind::AbortedRead,
                        both,
                        format!("{who} read {value} in key {} of a rolled-back txn", o.key),
                    );
                }
                Some(_) => {}
            }
        }
        check_intermediate(history, v, o, &who, &ids, report);
        if !v.is_prefix(o.key, o.values) {
            let why = where_off(o.values, &v.orders[&o.key]);
            report.add(Kind::NonPrefix, ids, format!("{who} read key {} off its order: {why}", o.key));
        }
    }
}

/// Where a list leaves the order it should be a prefix of, in a few words
/// (the lists themselves can run to thousands of values).
fn where_off(read: &[Value], order: &[Value]) -> String {
    match read.iter().zip(order).position(|(r, o)| r != o) {
        Some(i) => format!("at position {i} of {} it has {}, the order {}", read.len(), read[i], order[i]),
        None => format!("it has {} values, the order only {}", read.len(), order.len()),
    }
}

/// A read whose last value (past the reader's own) is one of several that
/// another transaction appended to the key, and not its last.
fn check_intermediate(
    history: &History,
    v: &Versions<'_>,
    o: &Observation<'_>,
    who: &str,
    ids: &[u64],
    report: &mut Report,
) {
    let Some(last) = external_prefix(v, o.key, o.values, o.txn).last().copied() else { return };
    if let Some(w) = v.writer(o.key, last) {
        if !w.last_of_txn && Some(w.txn) != o.txn {
            let mut both = ids.to_vec();
            both.push(history.txns[w.txn].id);
            report.add(Kind::IntermediateRead, both, format!("{who} read key {} up to {last}, mid-transaction", o.key));
        }
    }
}

/// The list without the reader's own appends at its end: what it saw of
/// the others.
pub fn external_prefix<'a>(v: &Versions<'_>, key: Key, values: &'a [Value], reader: Option<usize>) -> &'a [Value] {
    let own = values
        .iter()
        .rev()
        .take_while(|value| reader.is_some() && v.writer(key, **value).map(|w| w.txn) == reader)
        .count();
    &values[..values.len() - own]
}

/// Acknowledged appends missing from a node's final list, and nodes that
/// finally disagree. Keys no final read covers are not judged.
pub fn check_final(history: &History, report: &mut Report) {
    let mut finals: BTreeMap<Key, Vec<(usize, &[Value])>> = BTreeMap::new();
    for f in &history.final_reads {
        finals.entry(f.key).or_default().push((f.node, &f.values));
    }
    for (key, lists) in &finals {
        if lists.windows(2).any(|w| w[0].1 != w[1].1) {
            let lens: Vec<String> = lists.iter().map(|(n, l)| format!("node {n}: {} values", l.len())).collect();
            report.add(Kind::Divergent, vec![], format!("key {key} differs between nodes ({})", lens.join(", ")));
        }
    }
    for txn in history.txns.iter().filter(|t| t.outcome == Outcome::Ok) {
        for (key, value) in txn.appends() {
            let Some(lists) = finals.get(&key) else { continue };
            let missing: Vec<usize> = lists.iter().filter(|(_, l)| !l.contains(&value)).map(|(n, _)| *n).collect();
            if !missing.is_empty() {
                report.add(
                    Kind::Lost,
                    vec![txn.id],
                    format!("acknowledged {value} in key {key} is not on nodes {missing:?}"),
                );
            }
        }
    }
}
