//! Adya's dependency graph over the transactions that took effect, built
//! from the key orders, and the cycles that name the anomalies.
//!
//! For each key, with versions in the order its lists show:
//! - ww: the writer of a version precedes the writer of the next one;
//! - wr: the writer of the last version a transaction read (past its own
//!   appends) precedes the reader;
//! - rw: the reader precedes the writer of the version after the one it
//!   read (an anti-dependency).
//!
//! A serializable history has no cycle. One of ww edges only is G0; of ww
//! and wr edges, G1c; with exactly one rw edge, G-single (read skew, lost
//! update); with more, G2. Rolled-back transactions take no part (what
//! was read of them is G1a).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::history::{History, Outcome};
use crate::report::{Kind, Report};
use crate::versions::{external_prefix, Versions};

const WW: u8 = 1;
const WR: u8 = 2;
const RW: u8 = 4;

/// At most this many cycles are reported of each kind, and at most this
/// many edges are searched from for each: a broken history can hold
/// millions, and a few examples say what is broken.
const MAX_PER_KIND: usize = 50;
const MAX_SEARCHES: usize = 20_000;

pub struct Graph {
    /// From each transaction (index), to each successor, the edge kinds.
    out: Vec<BTreeMap<usize, u8>>,
}

impl Graph {
    pub fn build(history: &History, v: &Versions<'_>) -> Graph {
        let mut g = Graph { out: vec![BTreeMap::new(); history.txns.len()] };
        let took_effect = |t: usize| history.txns[t].outcome != Outcome::Aborted;
        for (key, order) in &v.orders {
            let writers: Vec<Option<usize>> = order.iter().map(|value| v.writer(*key, *value).map(|w| w.txn)).collect();
            for pair in writers.windows(2) {
                if let [Some(a), Some(b)] = pair {
                    if a != b && took_effect(*a) && took_effect(*b) {
                        g.add(*a, *b, WW);
                    }
                }
            }
        }
        for o in v.observations.iter().filter(|o| v.is_prefix(o.key, o.values)) {
            let Some(reader) = o.txn else { continue };
            let seen = external_prefix(v, o.key, o.values, Some(reader));
            if let Some(w) = seen.last().and_then(|value| v.writer(o.key, *value)) {
                if w.txn != reader && took_effect(w.txn) {
                    g.add(w.txn, reader, WR);
                }
            }
            let next = v.orders[&o.key].get(seen.len()).and_then(|value| v.writer(o.key, *value));
            if let Some(w) = next {
                if w.txn != reader && took_effect(w.txn) {
                    g.add(reader, w.txn, RW);
                }
            }
        }
        g
    }

    fn add(&mut self, from: usize, to: usize, kind: u8) {
        *self.out[from].entry(to).or_insert(0) |= kind;
    }

    /// Strongly connected components (Tarjan's, without recursion): only
    /// an edge inside one can be on a cycle.
    fn components(&self) -> Vec<usize> {
        let n = self.out.len();
        let (mut index, mut low, mut comp) = (vec![usize::MAX; n], vec![0; n], vec![usize::MAX; n]);
        let (mut on_stack, mut stack, mut next_index, mut next_comp) = (vec![false; n], vec![], 0, 0);
        for root in 0..n {
            if index[root] != usize::MAX {
                continue;
            }
            let mut calls: Vec<(usize, Vec<usize>)> = vec![(root, self.out[root].keys().copied().collect())];
            index[root] = next_index;
            low[root] = next_index;
            next_index += 1;
            stack.push(root);
            on_stack[root] = true;
            while let Some((node, pending)) = calls.last_mut() {
                let node = *node;
                if let Some(succ) = pending.pop() {
                    if index[succ] == usize::MAX {
                        index[succ] = next_index;
                        low[succ] = next_index;
                        next_index += 1;
                        stack.push(succ);
                        on_stack[succ] = true;
                        calls.push((succ, self.out[succ].keys().copied().collect()));
                    } else if on_stack[succ] {
                        low[node] = low[node].min(index[succ]);
                    }
                    continue;
                }
                calls.pop();
                if let Some((parent, _)) = calls.last() {
                    low[*parent] = low[*parent].min(low[node]);
                }
                if low[node] == index[node] {
                    while let Some(m) = stack.pop() {
                        on_stack[m] = false;
                        comp[m] = next_comp;
                        if m == node {
                            break;
                        }
                    }
                    next_comp += 1;
                }
            }
        }
        comp
    }

    /// The shortest path from `from` to `to` over edges of `mask` inside
    /// component `c`, both ends included.
    fn path(&self, from: usize, to: usize, mask: u8, comp: &[usize]) -> Option<Vec<usize>> {
        let mut before: BTreeMap<usize, usize> = BTreeMap::new();
        let mut queue = VecDeque::from([from]);
        before.insert(from, from);
        while let Some(node) = queue.pop_front() {
            if node == to {
                let mut path = vec![to];
                while *path.last().unwrap() != from {
                    path.push(before[path.last().unwrap()]);
                }
                path.reverse();
                return Some(path);
            }
            for (succ, kinds) in &self.out[node] {
                if kinds & mask != 0 && comp[*succ] == comp[from] && !before.contains_key(succ) {
                    before.insert(*succ, node);
                    queue.push_back(*succ);
                }
            }
        }
        None
    }

    fn label(&self, from: usize, to: usize, mask: u8) -> &'static str {
        let kinds = self.out[from].get(&to).copied().unwrap_or(0) & mask;
        if kinds & WW != 0 {
            "ww"
        } else if kinds & WR != 0 {
            "wr"
        } else {
            "rw"
        }
    }
}

/// Each cycle found, by kind, in words.
pub fn check(history: &History, v: &Versions<'_>, report: &mut Report) {
    let g = Graph::build(history, v);
    let comp = g.components();
    let mut found: BTreeSet<(Kind, Vec<usize>)> = BTreeSet::new();
    let mut per_kind: BTreeMap<Kind, (usize, usize)> = BTreeMap::new(); // (searches, cycles found)
    for (a, succs) in g.out.iter().enumerate() {
        for (&b, &kinds) in succs.iter().filter(|(b, _)| comp[**b] == comp[a]) {
            // The way back from b to a over each mask, searched once for
            // all the kinds this edge seeds (G1c, G-single and G2's check
            // share ww|wr).
            let mut back: BTreeMap<u8, Option<Vec<usize>>> = BTreeMap::new();
            let mut way_back = |mask: u8| back.entry(mask).or_insert_with(|| g.path(b, a, mask, &comp)).clone();
            for (kind, seed, mask) in searches_for(kinds) {
                let (searches, cycles) = per_kind.entry(kind).or_insert((0, 0));
                if *searches >= MAX_SEARCHES || *cycles >= MAX_PER_KIND {
                    continue;
                }
                *searches += 1;
                if kind == Kind::G2 && way_back(WW | WR).is_some() {
                    continue; // a G-single through this edge
                }
                let Some(path) = way_back(mask) else { continue };
                if found.insert((kind, canonical(a, &path))) {
                    *cycles += 1;
                    report_cycle(history, &g, kind, (a, seed), &path, mask, report);
                }
            }
        }
    }
}

/// The searches an edge of `kinds` seeds: (kind, the seed edge's own kind,
/// the edges the rest of the cycle may use).
fn searches_for(kinds: u8) -> Vec<(Kind, u8, u8)> {
    let mut out = vec![];
    if kinds & WW != 0 {
        out.push((Kind::G0, WW, WW));
    }
    if kinds & WR != 0 {
        out.push((Kind::G1c, WR, WW | WR));
    }
    if kinds & RW != 0 {
        out.push((Kind::GSingle, RW, WW | WR));
        out.push((Kind::G2, RW, WW | WR | RW));
    }
    out
}

/// The cycle a -> path[0] -> ... -> a, as its nodes from the smallest.
fn canonical(a: usize, path: &[usize]) -> Vec<usize> {
    let mut nodes = vec![a];
    nodes.extend(&path[..path.len() - 1]);
    let start = nodes.iter().enumerate().min_by_key(|(_, n)| **n).map(|(i, _)| i).unwrap_or(0);
    nodes.rotate_left(start);
    nodes
}

fn report_cycle(
    history: &History,
    g: &Graph,
    kind: Kind,
    (a, seed): (usize, u8),
    path: &[usize],
    mask: u8,
    report: &mut Report,
) {
    let id = |t: usize| history.txns[t].id;
    let mut words = format!("txn {} -{}-> txn {}", id(a), g.label(a, path[0], seed), id(path[0]));
    for pair in path.windows(2) {
        words += &format!(" -{}-> txn {}", g.label(pair[0], pair[1], mask), id(pair[1]));
    }
    let mut ids = vec![id(a)];
    ids.extend(path[..path.len() - 1].iter().map(|t| id(*t)));
    report.add(kind, ids, words);
}
