//! Bank transfers on every node at once, with a ledger of what the server
//! acknowledged: the workload partition tests judge a cluster by. Each
//! transfer moves money between two accounts and records itself in
//! `bank.ledger`, in one transaction; the tellers remember which transfers
//! were acknowledged (COMMIT returned OK) and which ended in doubt (an error
//! or a timeout: it may or may not have committed). At the end, on every node:
//! every acknowledged transfer is in the ledger, nothing outside the
//! acknowledged and doubtful ones is, the accounts equal what the ledger
//! says they should hold, the money adds up, and all nodes hold the same.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use tandem::cluster::{Cluster, Node};

use crate::{error_kind, sql};

pub const ACCOUNTS: u64 = 20;
pub const OPENING_BALANCE: i64 = 1000;

/// What every teller saw, by transfer id.
#[derive(Default)]
struct Outcomes {
    acked: BTreeSet<u64>,
    doubtful: BTreeSet<u64>,
    /// When each acknowledged transfer was sent, by teller: "who served when".
    acks_by_node: BTreeMap<usize, Vec<Instant>>,
    /// The errors seen, by their text's first words, and how often.
    errors: BTreeMap<String, u64>,
}

pub struct Bank {
    stop: Arc<AtomicBool>,
    outcomes: Arc<Mutex<Outcomes>>,
    tellers: Vec<std::thread::JoinHandle<()>>,
}

/// The tables, on one node (the others get them by replication).
pub fn open(node: &Node) -> Result<()> {
    sql(
        node,
        &format!(
            "CREATE DATABASE bank; \
             CREATE TABLE bank.account (id INT PRIMARY KEY, balance BIGINT NOT NULL); \
             CREATE TABLE bank.ledger (id BIGINT PRIMARY KEY, node INT NOT NULL, src INT NOT NULL, \
               dst INT NOT NULL, amount INT NOT NULL); \
             USE bank; INSERT INTO bank.account SELECT seq, {OPENING_BALANCE} FROM seq_1_to_{ACCOUNTS}"
        ),
    )
    .map(drop)
    .map_err(anyhow::Error::msg)
}

impl Bank {
    /// One teller per node of `nodes`, until `stop`. Transfer ids carry
    /// `round`, so that several rounds on one cluster never share one.
    pub fn start(c: &Cluster, nodes: &[usize], round: u64) -> Bank {
        let stop = Arc::new(AtomicBool::new(false));
        let outcomes = Arc::new(Mutex::new(Outcomes::default()));
        let tellers = nodes
            .iter()
            .map(|&i| {
                let (node, stop, outcomes) = (c.node(i).clone(), stop.clone(), outcomes.clone());
                std::thread::spawn(move || teller(round, i, &node, &stop, &outcomes))
            })
            .collect();
        Bank { stop, outcomes, tellers }
    }

    /// Acknowledged transfers that node `i`'s teller sent at `since` or later.
    pub fn acks_since(&self, i: usize, since: Instant) -> usize {
        let outcomes = self.outcomes.lock().unwrap();
        outcomes.acks_by_node.get(&i).map_or(0, |acks| acks.iter().filter(|t| **t >= since).count())
    }

    /// Waits until node `i`'s teller has had `count` more transfers acknowledged.
    pub fn wait_acks(&self, i: usize, count: usize, timeout: Duration) -> Result<()> {
        let since = Instant::now();
        crate::wait_for(&format!("{count} transfers acknowledged on node {i}"), timeout, || {
            Ok(self.acks_since(i, since) >= count)
        })
        .map(drop)
    }

    /// Stops the tellers; returns what they saw.
    pub fn stop(self) -> Ledger {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tellers {
            t.join().expect("teller thread");
        }
        let outcomes = std::mem::take(&mut *self.outcomes.lock().unwrap());
        Ledger { acked: outcomes.acked, doubtful: outcomes.doubtful, errors: outcomes.errors }
    }
}

fn teller(round: u64, i: usize, node: &Node, stop: &AtomicBool, outcomes: &Mutex<Outcomes>) {
    let mut serial = 0u64;
    while !stop.load(Ordering::Relaxed) {
        serial += 1;
        let id = (round << 40) | ((i as u64) << 32) | serial;
        // A fixed mix per id: the same run moves the same money.
        let src = 1 + id.wrapping_mul(2_654_435_761) % ACCOUNTS;
        let dst = 1 + (src + id % (ACCOUNTS - 1)) % ACCOUNTS;
        let amount = 1 + id % 10;
        let transfer = format!(
            "SET SESSION innodb_lock_wait_timeout=10; START TRANSACTION; \
             UPDATE bank.account SET balance = balance - {amount} WHERE id = {src}; \
             UPDATE bank.account SET balance = balance + {amount} WHERE id = {dst}; \
             INSERT INTO bank.ledger VALUES ({id}, {i}, {src}, {dst}, {amount}); COMMIT"
        );
        let sent = Instant::now();
        let result = sql(node, &transfer);
        let ok = result.is_ok();
        let mut o = outcomes.lock().unwrap();
        match result {
            Ok(_) => {
                o.acked.insert(id);
                o.acks_by_node.entry(i).or_default().push(sent);
            }
            Err(e) => {
                o.doubtful.insert(id);
                *o.errors.entry(error_kind(&e)).or_default() += 1;
            }
        }
        drop(o);
        // A pace two cores can take on three nodes, failures slower still.
        std::thread::sleep(Duration::from_millis(if ok { 20 } else { 200 }));
    }
}

/// "ERROR 1047 (08S01)" and the like: the kind, without the statement the
/// client echoes before it or the line and message after it.
/// What the tellers saw, to check every node against.
#[derive(Default)]
pub struct Ledger {
    pub acked: BTreeSet<u64>,
    pub doubtful: BTreeSet<u64>,
    pub errors: BTreeMap<String, u64>,
}

impl Ledger {
    /// Another round's outcomes added to these.
    pub fn add(&mut self, other: Ledger) {
        self.acked.extend(other.acked);
        self.doubtful.extend(other.doubtful);
        for (kind, n) in other.errors {
            *self.errors.entry(kind).or_default() += n;
        }
    }

    /// The checks of the module's head, on every node of `c`, after a
    /// causal wait on each.
    pub fn verify(&self, c: &Cluster) -> Result<()> {
        let mut reference = None;
        for node in c.nodes() {
            let ledger = ledger_of(node)?;
            let missing: Vec<_> = self.acked.iter().filter(|id| !ledger.contains_key(id)).take(10).collect();
            ensure!(missing.is_empty(), "{} lost acknowledged transfers, among them {missing:?}", node.name);
            let invented: Vec<_> =
                ledger.keys().filter(|id| !self.acked.contains(id) && !self.doubtful.contains(id)).take(10).collect();
            ensure!(invented.is_empty(), "{} has transfers no teller sent: {invented:?}", node.name);
            let accounts = accounts_of(node)?;
            ensure!(accounts.len() as u64 == ACCOUNTS, "{} has {} accounts", node.name, accounts.len());
            let total: i64 = accounts.values().sum();
            ensure!(total == ACCOUNTS as i64 * OPENING_BALANCE, "{}: the money adds up to {total}", node.name);
            let expected = balances_from(&ledger);
            for (id, balance) in &accounts {
                let should = expected.get(id).copied().unwrap_or(OPENING_BALANCE);
                ensure!(*balance == should, "{}: account {id} holds {balance}, its ledger says {should}", node.name);
            }
            match &reference {
                None => reference = Some((node.name.clone(), accounts, ledger)),
                Some((name, a, l)) => {
                    ensure!(*a == accounts && *l == ledger, "{} and {name} differ", node.name);
                }
            }
        }
        Ok(())
    }

    /// The in-doubt transfers that did commit (in node `node`'s ledger).
    pub fn doubtful_committed(&self, node: &Node) -> Result<usize> {
        let ledger = ledger_of(node)?;
        Ok(self.doubtful.iter().filter(|id| ledger.contains_key(id)).count())
    }
}

/// id -> (src, dst, amount)
type Entries = BTreeMap<u64, (u64, u64, i64)>;

fn ledger_of(node: &Node) -> Result<Entries> {
    let rows = sql(node, "SET SESSION wsrep_sync_wait=15; SELECT id, src, dst, amount FROM bank.ledger")
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("reading {}'s ledger", node.name))?;
    rows.lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            ensure!(f.len() == 4, "ledger row {l:?}");
            Ok((f[0].parse()?, (f[1].parse()?, f[2].parse()?, f[3].parse()?)))
        })
        .collect()
}

fn accounts_of(node: &Node) -> Result<BTreeMap<u64, i64>> {
    let rows = sql(node, "SET SESSION wsrep_sync_wait=15; SELECT id, balance FROM bank.account")
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("reading {}'s accounts", node.name))?;
    rows.lines()
        .map(|l| {
            let (id, balance) = l.split_once('\t').with_context(|| format!("account row {l:?}"))?;
            Ok((id.parse()?, balance.parse()?))
        })
        .collect()
}

fn balances_from(ledger: &Entries) -> BTreeMap<u64, i64> {
    let mut out: BTreeMap<u64, i64> = (1..=ACCOUNTS).map(|id| (id, OPENING_BALANCE)).collect();
    for (src, dst, amount) in ledger.values() {
        *out.entry(*src).or_default() -= amount;
        *out.entry(*dst).or_default() += amount;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balances_follow_the_ledger() {
        let ledger: Entries = [(1, (1, 2, 5)), (2, (2, 3, 7))].into_iter().collect();
        let b = balances_from(&ledger);
        assert_eq!(b[&1], OPENING_BALANCE - 5);
        assert_eq!(b[&2], OPENING_BALANCE + 5 - 7);
        assert_eq!(b[&3], OPENING_BALANCE + 7);
        assert_eq!(b.values().sum::<i64>(), ACCOUNTS as i64 * OPENING_BALANCE);
    }
}
