//! The model database of one member: a bank of accounts whose total never
//! changes, the transactions it committed, and its position (the last
//! seqno it applied, as `wsrep_last_committed`).
//!
//! Durability is InnoDB's with `innodb_flush_log_at_trx_commit=0/2`: what
//! was committed since the last flush (once a second) may be lost in a
//! crash, so the recovered position X (what `--wsrep-recover` reports) can
//! be behind what the member had applied, and behind its own log.
//!
//! ```text
//!   apply(seqno, change) ──► current ──(flush every second)──► durable
//!   crash(k)             ──► durable + all but the last k changes since the flush
//! ```

use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};

use tandem_engine::types::{Gtid, Seqno, Uuid};

pub const ACCOUNTS: usize = 8;
pub const OPENING_BALANCE: i64 = 100;
/// What every database that holds the bank must always add up to.
pub const BANK_TOTAL: i64 = ACCOUNTS as i64 * OPENING_BALANCE;

/// What one committed write-set did: its transaction and the new balances
/// (row images, as in a row-based binlog).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub trx: u64,
    pub writes: [(usize, i64); 2],
}

/// A database's whole content; also what a state transfer copies.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Image {
    /// The history the data belongs to (nil: none yet).
    pub group: Uuid,
    pub position: Seqno,
    /// `None`: an empty data directory (a node that never had the data).
    pub balances: Option<[i64; ACCOUNTS]>,
    pub trxs: BTreeSet<u64>,
    /// An order-free digest of `trxs`, kept as they are added, so that
    /// comparing contents after every commit costs nothing.
    trx_digest: u64,
}

fn trx_hash(trx: u64) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    trx.hash(&mut h);
    h.finish()
}

impl Image {
    fn empty() -> Image {
        Image { group: Uuid::NIL, position: -1, balances: None, trxs: BTreeSet::new(), trx_digest: 0 }
    }

    fn apply(&mut self, seqno: Seqno, change: Option<&Change>) {
        self.position = seqno;
        let (Some(change), Some(balances)) = (change, self.balances.as_mut()) else { return };
        for &(account, value) in &change.writes {
            balances[account] = value;
        }
        if self.trxs.insert(change.trx) {
            self.trx_digest = self.trx_digest.wrapping_add(trx_hash(change.trx));
        }
    }

    /// The content that every member must agree on after a seqno.
    pub fn content_hash(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (self.balances, self.trxs.len(), self.trx_digest).hash(&mut h);
        h.finish()
    }
}

pub struct Db {
    pub current: Image,
    durable: Image,
    /// Applied since the last flush, oldest first: what a crash may lose.
    unflushed: Vec<(Seqno, Option<Change>)>,
    /// Flushed at every commit (`innodb_flush_log_at_trx_commit=1`).
    flush_each_commit: bool,
    /// The member's log was replaced by the leader's checkpoint since this
    /// data was last transferred: its own log may not reach back to it.
    pub log_replaced: bool,
}

impl Db {
    /// The founder's database: the bank, at no position yet.
    pub fn founder(flush_each_commit: bool) -> Db {
        let mut image = Image::empty();
        image.balances = Some([OPENING_BALANCE; ACCOUNTS]);
        Db { durable: image.clone(), current: image, unflushed: vec![], flush_each_commit, log_replaced: false }
    }

    /// An empty data directory: it gets the bank by state transfer.
    pub fn empty(flush_each_commit: bool) -> Db {
        Db {
            current: Image::empty(),
            durable: Image::empty(),
            unflushed: vec![],
            flush_each_commit,
            log_replaced: false,
        }
    }

    pub fn position(&self) -> Seqno {
        self.current.position
    }

    /// Where the data is, as the server reports it at start.
    pub fn gtid(&self) -> Gtid {
        if self.current.group.is_nil() || self.current.position < 0 {
            return Gtid::UNDEFINED;
        }
        Gtid { uuid: self.current.group, seqno: self.current.position }
    }

    /// Commits `seqno` (a write-set, a rolled-back loser, or a view: each
    /// consumes its seqno). Refused unless it is the very next one.
    pub fn apply(&mut self, seqno: Seqno, change: Option<Change>) -> Result<(), String> {
        if seqno != self.current.position + 1 {
            return Err(format!("seqno {seqno} applied at position {}", self.current.position));
        }
        self.current.apply(seqno, change.as_ref());
        self.unflushed.push((seqno, change));
        if self.flush_each_commit {
            self.flush();
        }
        Ok(())
    }

    /// The server is connected at `position` of history `group` (a founder
    /// starts just below its first view; a resumed node where it is).
    pub fn connect_at(&mut self, group: Uuid, position: Seqno) {
        self.current.group = group;
        self.current.position = position;
        self.flush();
    }

    /// A state transfer replaced the data (durable once received).
    pub fn install(&mut self, image: Image) {
        self.current = image;
        self.log_replaced = false;
        self.flush();
    }

    /// A failed state transfer leaves an emptied data directory.
    pub fn wipe(&mut self) {
        self.current = Image::empty();
        self.flush();
    }

    pub fn flush(&mut self) {
        self.durable = self.current.clone();
        self.unflushed.clear();
    }

    /// Commits a crash may lose right now.
    pub fn unflushed(&self) -> usize {
        self.unflushed.len()
    }

    /// A crash that loses the last `lost` commits since the flush; returns
    /// the transactions it took.
    pub fn crash(&mut self, lost: usize) -> Vec<u64> {
        let kept = self.unflushed.len().saturating_sub(lost);
        let mut image = self.durable.clone();
        for (seqno, change) in &self.unflushed[..kept] {
            image.apply(*seqno, change.as_ref());
        }
        let gone = self.unflushed[kept..].iter().filter_map(|(_, c)| c.as_ref().map(|c| c.trx)).collect();
        self.current = image;
        self.flush();
        gone
    }

    pub fn total(&self) -> Option<i64> {
        self.current.balances.map(|b| b.iter().sum())
    }
}

/// A transfer's row images, as a write-set carries them, with `filler`
/// bytes of other row data (it fills log segments).
pub fn encode_change(writes: [(usize, i64); 2], filler: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(18 + filler);
    for (account, value) in writes {
        out.push(account as u8);
        out.extend_from_slice(&value.to_le_bytes());
    }
    out.resize(18 + filler, 0xab);
    out
}

pub fn decode_change(trx: u64, data: &[u8]) -> Change {
    assert!(data.len() >= 18, "a transfer write-set holds two row images");
    let image = |at: usize| {
        let value = i64::from_le_bytes(data[at + 1..at + 9].try_into().expect("8 bytes"));
        (data[at] as usize, value)
    };
    Change { trx, writes: [image(0), image(9)] }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_keeps_the_flushed_data_and_a_prefix_of_the_rest() {
        let mut db = Db::founder(false);
        db.connect_at(Uuid([1; 16]), 0);
        db.apply(1, None).unwrap();
        db.flush();
        db.apply(2, Some(Change { trx: 7, writes: [(0, 90), (1, 110)] })).unwrap();
        db.apply(3, None).unwrap();
        assert!(db.apply(5, None).is_err(), "a gap is refused");
        assert!(db.crash(1).is_empty(), "seqno 3 was a view");
        assert_eq!((db.position(), db.total()), (2, Some(BANK_TOTAL)));
        assert!(db.current.trxs.contains(&7));
        assert!(db.crash(5).is_empty());
        assert_eq!(db.position(), 2, "flushed by the previous recovery");
    }

    #[test]
    fn row_images_round_trip() {
        let change = decode_change(3, &encode_change([(2, -5), (7, 205)], 10));
        assert_eq!(change, Change { trx: 3, writes: [(2, -5), (7, 205)] });
    }
}
