//! The checkers. Cheap ones run as things happen (every ordered outcome,
//! every commit to a model database, every election, every restart); the
//! rest when a run ends, after the heal phase.
//!
//! ```text
//!   agreement        every member derives the same outcome and replicated state
//!                    from the same log entry, and sees the same outcome at a seqno
//!   dense            seqnos have no gaps
//!   first_committer  of two passed write-sets of different members on the
//!                    same account, the later had seen the earlier
//!   apply_order      a database commits seqno p+1 after p, never one twice
//!   db_agreement     every database holds the same content after a seqno
//!   bank_total       every database adds up to the opening total
//!   resume_position  a resumed server's data is where the core says it is
//!   sst_needless     no state transfer while the history after the data is
//!                    still replayable (own log from a checkpoint <= X, then
//!                    the leader's log)
//!   retention        a restarted member's log reaches back to its data
//!                    (nothing purged that the database had not made durable)
//!   raft_model       a committed log entry never changes (the model of Raft,
//!                    and the durable logs it stands on, keep it)
//!   liveness         after the heal phase every member is synced at the same
//!                    seqno, with nothing left to apply
//!   acked_durable    every acknowledged transaction is in every database
//!   identical        all databases are identical at the end
//! ```
//!
//! (`sst_needless`, `resume_position` and `retention` live where they look:
//! `process.rs`, `applier.rs`, `faults.rs`.)

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use tandem_engine::certification::Verdict;
use tandem_engine::group_state::{GroupState, Outcome};
use tandem_engine::types::{Seqno, Uuid};

use super::db::{Image, ACCOUNTS};

/// A check that failed: its name and what it saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub check: &'static str,
    pub detail: String,
}

pub type Checked<T> = Result<T, Failure>;

pub fn fail<T>(check: &'static str, detail: String) -> Checked<T> {
    Err(Failure { check, detail })
}

/// What the first member to see a seqno saw there.
struct Seen {
    hash: u64,
    description: String,
}

/// A passed write-set, for the first-committer check.
#[derive(PartialEq, Eq)]
struct Passed {
    source: Uuid,
    incarnation: u32,
}

#[derive(Default)]
pub struct History {
    outcomes: BTreeMap<Seqno, Seen>,
    /// account -> seqnos of passed write-sets that wrote it.
    writers: BTreeMap<usize, Vec<Seqno>>,
    passed: BTreeMap<Seqno, Passed>,
    /// Database content hash after each seqno, as first committed.
    contents: BTreeMap<Seqno, u64>,
    /// Acknowledged transactions: trx -> seqno.
    pub acked: BTreeMap<u64, Seqno>,
    /// Log index -> digest of the outcome and the replicated state after it.
    entries: BTreeMap<u64, u64>,
}

/// The seqno an outcome consumed, if any, and a digest of it.
fn digest(outcome: &Outcome) -> (Option<Seqno>, u64) {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let seqno = match outcome {
        Outcome::WriteSet { from, token, seqno, verdict, ws } => {
            let verdict = match verdict {
                Verdict::Pass { depends_on } => *depends_on,
                Verdict::Fail => -2,
            };
            (1, from.uuid, from.incarnation, token, verdict, ws.source, ws.trx_id, ws.last_seen, &ws.data).hash(&mut h);
            Some(*seqno)
        }
        Outcome::View(v) => {
            let members: Vec<Uuid> = v.members.iter().map(|m| m.uuid).collect();
            (2, v.view_no, &members).hash(&mut h);
            Some(v.state_id.seqno)
        }
        Outcome::Causal { from, token, seqno } => {
            (3, from.uuid, from.incarnation, token, seqno).hash(&mut h);
            None
        }
        Outcome::StateRequest { from, token, donor, seqno, .. } => {
            (4, from.uuid, from.incarnation, token, donor, seqno).hash(&mut h);
            None
        }
        Outcome::MemberState { from, state, seqno } => {
            (5, from.uuid, from.incarnation, *state as u8, seqno).hash(&mut h);
            None
        }
        Outcome::Progress { member, committed } => {
            (6, member, committed).hash(&mut h);
            None
        }
        Outcome::FlowControl { from, pause } => {
            (7, from.uuid, from.incarnation, pause).hash(&mut h);
            None
        }
        Outcome::TransferFailed { donor, joiner, code } => {
            (8, donor, joiner.uuid, joiner.incarnation, code).hash(&mut h);
            None
        }
        Outcome::Nothing => None,
    };
    (seqno, h.finish())
}

/// What every member's replicated state must agree on after an entry
/// (the certification index's own order is not comparable: a `HashMap`).
fn state_digest(state: &GroupState) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (state.group_uuid, state.seqno, state.view_no, state.first_seqno).hash(&mut h);
    for m in &state.members {
        (m.id, m.uuid, m.incarnation, m.state as u8, m.committed, m.ist).hash(&mut h);
    }
    (state.cert.purged_upto(), state.cert.index_size()).hash(&mut h);
    h.finish()
}

fn describe(outcome: &Outcome) -> String {
    match outcome {
        Outcome::WriteSet { verdict, ws, .. } => format!("write-set trx {} of {} ({verdict:?})", ws.trx_id, ws.source),
        Outcome::View(v) => {
            let members: Vec<Uuid> = v.members.iter().map(|m| m.uuid).collect();
            format!("view {} of {members:?}", v.view_no)
        }
        other => format!("{other:?}"),
    }
}

impl History {
    /// What `member` derived from log entry `index`: the outcome, and its
    /// replicated state after it. Every member derives the same from the
    /// same committed entry.
    pub fn observe(&mut self, member: &str, index: u64, outcome: &Outcome, state: &GroupState) -> Checked<()> {
        let (seqno, hash) = digest(outcome);
        let entry_hash = hash ^ state_digest(state).rotate_left(1);
        match self.entries.get(&index) {
            Some(&first) if first != entry_hash => {
                return fail(
                    "agreement",
                    format!(
                        "{member} derived {} (seqno {seqno:?}) from log entry {index}, others differently",
                        describe(outcome)
                    ),
                );
            }
            Some(_) => {}
            None => {
                self.entries.insert(index, entry_hash);
            }
        }
        let Some(seqno) = seqno else { return Ok(()) };
        if let Some(seen) = self.outcomes.get(&seqno) {
            if seen.hash != hash {
                let description = describe(outcome);
                return fail(
                    "agreement",
                    format!("{member} saw {description} at seqno {seqno}, others saw {}", seen.description),
                );
            }
            return Ok(());
        }
        self.outcomes.insert(seqno, Seen { hash, description: describe(outcome) });
        if let Outcome::WriteSet { from, seqno, verdict: Verdict::Pass { .. }, ws, .. } = outcome {
            let accounts = ws.keys.iter().filter_map(|k| k.parts.get(2)).map(|p| p[0] as usize);
            let accounts: BTreeSet<usize> = accounts.collect();
            let writer = Passed { source: ws.source, incarnation: from.incarnation };
            self.check_first_committer(*seqno, &writer, ws.last_seen, &accounts)?;
            for a in accounts {
                self.writers.entry(a).or_default().push(*seqno);
            }
            self.passed.insert(*seqno, writer);
        }
        Ok(())
    }

    /// Every passed write-set on the same account that this one had not
    /// seen is a lost update, unless the same process sent both (its locks
    /// ordered them; a restarted member's new process held none of the old
    /// one's).
    fn check_first_committer(
        &self,
        seqno: Seqno,
        writer: &Passed,
        last_seen: Seqno,
        accounts: &BTreeSet<usize>,
    ) -> Checked<()> {
        for a in accounts {
            let unseen = self.writers.get(a).into_iter().flatten().filter(|&&s| s > last_seen);
            for &earlier in unseen {
                if self.passed[&earlier] != *writer {
                    return fail(
                        "first_committer",
                        format!(
                            "seqno {seqno} (last seen {last_seen}) committed over unseen seqno {earlier} \
                             on account {a}"
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    /// Whether the write-set ordered at `seqno` passed certification.
    pub fn passed(&self, seqno: Seqno) -> bool {
        self.passed.contains_key(&seqno)
    }

    /// The database content a member reached by committing `seqno`.
    pub fn committed(&mut self, member: &str, seqno: Seqno, image: &Image) -> Checked<()> {
        let hash = image.content_hash();
        match self.contents.get(&seqno) {
            Some(&first) if first != hash => {
                fail("db_agreement", format!("{member}'s database after seqno {seqno} differs from the first member's"))
            }
            Some(_) => Ok(()),
            None => {
                self.contents.insert(seqno, hash);
                Ok(())
            }
        }
    }

    pub fn dense(&self) -> Checked<()> {
        let (Some(&first), Some(&last)) = (self.outcomes.keys().next(), self.outcomes.keys().next_back()) else {
            return fail("dense", "nothing was ordered".into());
        };
        if (last - first + 1) as usize != self.outcomes.len() {
            let missing = (first..=last).find(|s| !self.outcomes.contains_key(s));
            return fail("dense", format!("seqnos {first}..={last} with {missing:?} missing"));
        }
        Ok(())
    }

    pub fn last_seqno(&self) -> Seqno {
        self.outcomes.keys().next_back().copied().unwrap_or(0)
    }
}

/// Every database (by member name) is identical, holds the bank, and
/// holds every acknowledged transaction.
pub fn final_databases(images: &[(String, Image)], acked: &BTreeMap<u64, Seqno>) -> Checked<()> {
    let (first_name, first) = &images[0];
    for (name, image) in images {
        for (&trx, &seqno) in acked {
            if !image.trxs.contains(&trx) {
                return fail(
                    "acked_durable",
                    format!(
                        "{name} lacks acknowledged transaction {trx} (seqno {seqno}) at position {}",
                        image.position
                    ),
                );
            }
        }
        if image != first {
            return fail(
                "identical",
                format!("{name} ({}) differs from {first_name} ({})", summary(image), summary(first)),
            );
        }
    }
    Ok(())
}

pub fn bank_total(member: &str, image: &Image) -> Checked<()> {
    let Some(balances) = image.balances else { return Ok(()) };
    let total: i64 = balances.iter().sum();
    if total != super::db::BANK_TOTAL {
        return fail("bank_total", format!("{member}'s accounts add up to {total} at position {}", image.position));
    }
    Ok(())
}

fn summary(image: &Image) -> String {
    format!("position {}, {} transactions, balances {:?}", image.position, image.trxs.len(), image.balances)
}

/// A hash of everything that happened, for the determinism check.
#[derive(Default)]
pub struct Trace(u64);

impl Trace {
    pub fn note(&mut self, words: &[u64]) {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (self.0, words).hash(&mut h);
        self.0 = h.finish();
    }

    pub fn value(&self) -> u64 {
        self.0
    }
}

const _: () = assert!(ACCOUNTS <= u8::MAX as usize, "an account is one key byte");
