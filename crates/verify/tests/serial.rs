//! Property tests against a model: any history of transactions run one
//! after another on one set of lists, some rolled back and some without an
//! answer, is clean, down to unsynced stale reads; and an acknowledged
//! append dropped from one node's final lists is always found.

use std::collections::BTreeMap;

use proptest::prelude::*;
use tandem_verify::{check, FinalRead, History, Kind, Op, Outcome, Txn};

/// What a generated transaction does: (read or append, key) per step.
type Plan = Vec<(bool, u64)>;

fn plans() -> impl Strategy<Value = Vec<(Plan, u8)>> {
    let step = (any::<bool>(), 0u64..4);
    prop::collection::vec((prop::collection::vec(step, 1..5), 0u8..10), 1..40)
}

/// Runs the plans one after another. Outcome by the second number: 0 is
/// rolled back, 1 gets no answer but commits, 2 gets no answer and does
/// not, the rest commit.
fn serial(plans: &[(Plan, u8)]) -> History {
    let mut lists: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    let mut next_value = 1;
    let mut txns = vec![];
    for (i, (plan, fate)) in plans.iter().enumerate() {
        let mut mine = lists.clone();
        let mut ops = vec![];
        for (n, (read, key)) in plan.iter().enumerate() {
            let list = mine.entry(*key).or_default();
            if *read {
                ops.push(Op::Read { key: *key, values: list.clone(), synced: n == 0 });
            } else {
                list.push(next_value);
                ops.push(Op::Append { key: *key, value: next_value });
                next_value += 1;
            }
        }
        let (outcome, commits) = match fate {
            0 => (Outcome::Aborted, false),
            1 => (Outcome::Unknown, true),
            2 => (Outcome::Unknown, false),
            _ => (Outcome::Ok, true),
        };
        if commits {
            lists = mine;
        }
        let id = i as u64 + 1;
        let completed = (outcome != Outcome::Unknown).then_some(10 * id + 5);
        txns.push(Txn { id, node: i % 3, invoked: 10 * id, completed, outcome, ops });
    }
    let final_reads = (0..3)
        .flat_map(|node| lists.iter().map(move |(key, values)| FinalRead { node, key: *key, values: values.clone() }))
        .collect();
    History { txns, final_reads }
}

proptest! {
    #[test]
    fn a_serial_history_is_clean(plans in plans()) {
        let h = serial(&plans);
        let report = check(&h);
        prop_assert!(report.findings.is_empty(), "{}", report);
    }

    #[test]
    fn an_acknowledged_append_dropped_on_one_node_is_lost(plans in plans(), pick in any::<prop::sample::Index>()) {
        let mut h = serial(&plans);
        let acked: Vec<(u64, u64)> =
            h.txns.iter().filter(|t| t.outcome == Outcome::Ok).flat_map(|t| t.appends().collect::<Vec<_>>()).collect();
        prop_assume!(!acked.is_empty());
        let (key, value) = acked[pick.index(acked.len())];
        let on_node_2 = h.final_reads.iter_mut().find(|f| f.node == 2 && f.key == key).unwrap();
        on_node_2.values.retain(|v| *v != value);
        let report = check(&h);
        prop_assert!(report.of(Kind::Lost).any(|f| f.detail.contains(&format!("acknowledged {value} "))), "{}", report);
        prop_assert_eq!(report.count(Kind::Divergent), 1, "{}", report);
        prop_assert!(!report.is_clean());
    }
}
