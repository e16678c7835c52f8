//! Elle-style list-append clients (issue 49): short transactions of appends
//! and whole-list reads on a few hot keys, on every node at once, each
//! recorded with when it was sent and answered, how it ended, and what it
//! read; then every node's lists once the cluster is quiet. The history
//! goes to `tandem_verify::check`.
//!
//! A list is a row of `la.lists`, its values a comma-separated text. Each
//! transaction is one client session (`mariadb -e`), with
//! `wsrep_sync_wait=1`: the server syncs the first statement of a
//! transaction, so a read that comes first is marked synced.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tandem::cluster::{Cluster, Node};
use tandem_verify::{FinalRead, History, Op, Outcome, Txn};

use crate::{error_kind, sql};

/// Hot keys: few enough that transactions on different nodes meet.
pub const KEYS: u64 = 8;

pub fn open(node: &Node) -> Result<()> {
    sql(node, "CREATE DATABASE la; CREATE TABLE la.lists (id INT PRIMARY KEY, val TEXT NOT NULL)")
        .map(drop)
        .map_err(anyhow::Error::msg)
}

pub struct Clients {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<Vec<Txn>>>,
    errors: Errors,
}

/// The errors the clients saw, by their first words ("ERROR 1213 (40001)"),
/// and how often: which ones a fault brings, and how each was judged.
type Errors = Arc<std::sync::Mutex<BTreeMap<String, u64>>>;

impl Clients {
    /// `per_node` clients on each node, their transactions drawn from `seed`.
    pub fn start(c: &Cluster, per_node: usize, seed: u64) -> Clients {
        let stop = Arc::new(AtomicBool::new(false));
        let errors = Errors::default();
        let epoch = Instant::now();
        let mut threads = vec![];
        for i in 1..=c.len() {
            for k in 0..per_node {
                let client = (i * per_node + k) as u64;
                let (node, stop, errors) = (c.node(i).clone(), stop.clone(), errors.clone());
                let seed = seed ^ client.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                threads.push(std::thread::spawn(move || run(client, i, &node, &stop, epoch, seed, &errors)));
            }
        }
        Clients { stop, threads, errors }
    }

    /// Stops the clients; every transaction they ran, and the errors they
    /// saw (each with its count and the outcome it was taken for).
    pub fn stop(self) -> (Vec<Txn>, BTreeMap<String, u64>) {
        self.stop.store(true, Ordering::Relaxed);
        let txns = self.threads.into_iter().flat_map(|t| t.join().expect("list-append client")).collect();
        let errors = std::mem::take(&mut *self.errors.lock().unwrap());
        (txns, errors)
    }
}

fn run(
    client: u64,
    node_index: usize,
    node: &Node,
    stop: &AtomicBool,
    epoch: Instant,
    seed: u64,
    errors: &Errors,
) -> Vec<Txn> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut txns = vec![];
    let mut serial = 0u64;
    while !stop.load(Ordering::Relaxed) {
        serial += 1;
        let id = (client << 32) | serial;
        let ops = plan(&mut rng, id);
        let invoked = epoch.elapsed().as_micros() as u64;
        let answer = sql(node, &render(&ops));
        let answered = epoch.elapsed().as_micros() as u64;
        if let Err(e) = &answer {
            let kind = format!("{} ({:?})", error_kind(e), outcome_of_error(e));
            *errors.lock().unwrap().entry(kind).or_default() += 1;
        }
        let (outcome, ops) = judge(ops, answer);
        let completed = (outcome != Outcome::Unknown).then_some(answered);
        txns.push(Txn { id, node: node_index, invoked, completed, outcome, ops });
        // A pace two cores take on three nodes; failures (a node down) slower.
        std::thread::sleep(Duration::from_millis(if outcome == Outcome::Ok { 5 } else { 200 }));
    }
    txns
}

/// One to four operations, reads and appends alike; appended values are
/// the transaction's id times 4 plus the step, unique in the run.
pub fn plan(rng: &mut StdRng, id: u64) -> Vec<Op> {
    let steps = rng.gen_range(1..=4u64);
    (0..steps)
        .map(|step| {
            let key = rng.gen_range(0..KEYS);
            if rng.gen_bool(0.5) {
                Op::Read { key, values: vec![], synced: step == 0 }
            } else {
                Op::Append { key, value: id * 4 + step }
            }
        })
        .collect()
}

/// The transaction as SQL. Each read answers one row, `r<key>:<list>`.
pub fn render(ops: &[Op]) -> String {
    let mut sql =
        String::from("SET SESSION wsrep_sync_wait=1; SET SESSION innodb_lock_wait_timeout=5; START TRANSACTION; ");
    for op in ops {
        sql += &match op {
            Op::Append { key, value } => format!(
                "INSERT INTO la.lists VALUES ({key}, '{value}') \
                 ON DUPLICATE KEY UPDATE val = CONCAT(val, ',', '{value}'); "
            ),
            Op::Read { key, .. } => {
                format!("SELECT CONCAT('r{key}:', IFNULL((SELECT val FROM la.lists WHERE id = {key}), '')); ")
            }
        };
    }
    sql + "COMMIT"
}

/// How the transaction ended, from the client's answer, and its reads
/// filled in when it committed. An error the server gave means it rolled
/// back (the session ends, and the transaction with it), except error 1180
/// ("Got error during COMMIT"): the server gives it when replication
/// failed after the write-set may have left the node (it lost the primary
/// component meanwhile), so the rest of the cluster may have committed it.
/// A connection that never opened ran nothing; a connection lost, or a
/// client that hung, may have committed.
pub fn judge(mut ops: Vec<Op>, answer: Result<String, String>) -> (Outcome, Vec<Op>) {
    let output = match answer {
        Ok(output) => output,
        Err(e) => return (outcome_of_error(&e), ops),
    };
    let mut rows = output.lines();
    for op in &mut ops {
        if let Op::Read { key, values, .. } = op {
            match rows.next().and_then(|row| parse_read(row, *key)) {
                Some(read) => *values = read,
                // Not what was asked: nothing here can be trusted.
                None => return (Outcome::Unknown, ops),
            }
        }
    }
    (Outcome::Ok, ops)
}

fn outcome_of_error(e: &str) -> Outcome {
    let code = e.find("ERROR ").and_then(|at| e[at + 6..].split(|c: char| !c.is_ascii_digit()).next()?.parse().ok());
    match code {
        // Can't connect (socket, TCP): nothing ran.
        Some(2002 | 2003) => Outcome::Aborted,
        Some(1180) => Outcome::Unknown,
        // The client's own errors: the connection broke, perhaps after COMMIT.
        Some(c) if c >= 2000 => Outcome::Unknown,
        Some(_) => Outcome::Aborted,
        None => Outcome::Unknown,
    }
}

/// "ERROR 1213 (40001)": the error without the line and message after it.
fn parse_read(row: &str, key: u64) -> Option<Vec<u64>> {
    let list = row.strip_prefix(&format!("r{key}:"))?;
    if list.is_empty() {
        return Some(vec![]);
    }
    list.split(',').map(|v| v.parse().ok()).collect()
}

/// Every key on every node, read after a causal wait once the clients
/// stopped (a key a node lacks is an empty list there).
pub fn final_reads(c: &Cluster) -> Result<Vec<FinalRead>> {
    let mut out = vec![];
    for i in 1..=c.len() {
        let rows = sql(c.node(i), "SET SESSION wsrep_sync_wait=15; SELECT id, val FROM la.lists")
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("final read on node {i}"))?;
        let mut lists: BTreeMap<u64, Vec<u64>> = (0..KEYS).map(|k| (k, vec![])).collect();
        for row in rows.lines() {
            let (key, val) = row.split_once('\t').context("a row of la.lists")?;
            lists.insert(key.parse()?, val.split(',').map(|v| v.parse()).collect::<Result<_, _>>()?);
        }
        out.extend(lists.into_iter().map(|(key, values)| FinalRead { node: i, key, values }));
    }
    Ok(out)
}

/// The history of a run: the clients' transactions and the final reads.
pub fn history(txns: Vec<Txn>, c: &Cluster) -> Result<History> {
    Ok(History { txns, final_reads: final_reads(c)? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_committed_answer_fills_the_reads_in_order() {
        let ops = vec![
            Op::Read { key: 3, values: vec![], synced: true },
            Op::Append { key: 3, value: 41 },
            Op::Read { key: 5, values: vec![], synced: false },
        ];
        let (outcome, ops) = judge(ops, Ok("r3:7,9\nr5:".into()));
        assert_eq!(outcome, Outcome::Ok);
        assert_eq!(ops[0], Op::Read { key: 3, values: vec![7, 9], synced: true });
        assert_eq!(ops[2], Op::Read { key: 5, values: vec![], synced: false });
    }

    #[test]
    fn an_answer_that_does_not_match_the_reads_is_unknown() {
        let ops = vec![Op::Read { key: 3, values: vec![], synced: true }];
        assert_eq!(judge(ops.clone(), Ok("r4:1".into())).0, Outcome::Unknown);
        assert_eq!(judge(ops, Ok(String::new())).0, Outcome::Unknown);
    }

    #[test]
    fn errors_tell_rolled_back_from_unknown() {
        let judged = |e: &str| judge(vec![], Err(e.into())).0;
        assert_eq!(judged("ERROR 1213 (40001) at line 1: Deadlock found when trying to get lock"), Outcome::Aborted);
        assert_eq!(judged("ERROR 1047 (08S01) at line 1: WSREP has not yet prepared node"), Outcome::Aborted);
        assert_eq!(judged("ERROR 2002 (HY000): Can't connect to local server through socket"), Outcome::Aborted);
        assert_eq!(judged("ERROR 2013 (HY000) at line 1: Lost connection to server during query"), Outcome::Unknown);
        assert_eq!(
            judged("ERROR 1180 (HY000) at line 1: Got error 6 \"No such device or address\" during COMMIT"),
            Outcome::Unknown
        );
        assert_eq!(judged("statement still running after 120s on node2: ..."), Outcome::Unknown);
    }

    #[test]
    fn the_sql_reads_and_appends_in_one_transaction() {
        let ops = vec![Op::Append { key: 2, value: 8 }, Op::Read { key: 2, values: vec![], synced: false }];
        let sql = render(&ops);
        assert!(sql.contains("START TRANSACTION;") && sql.ends_with("COMMIT"), "{sql}");
        assert!(sql.find("INSERT INTO la.lists VALUES (2, '8')").unwrap() < sql.find("SELECT CONCAT('r2:'").unwrap());
    }
}
