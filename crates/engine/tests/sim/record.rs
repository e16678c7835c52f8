//! What the simulated group log holds: one [`Record`] per Raft entry (its
//! term and the event the group orders), and [`Checkpoint`]s of the
//! replicated state, as the group's store keeps them next to the log.
//!
//! ```text
//!   Record     { term, Blank | Membership | Message{origin, payload} }
//!   Checkpoint { index, term, position (seqno), config, GroupState bytes }
//! ```

use tandem_engine::types::Seqno;
use tandem_group::Membership;

/// The event of one log entry, as the Raft state machine hands it on.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A new leader's first entry: orders nothing (openraft's blank).
    Blank,
    /// A uniform membership: `Ordered::Membership`.
    Membership(Membership),
    /// A member's submission: `Ordered::Message`.
    Message { origin: u64, payload: Vec<u8> },
}

/// One log entry: the term of the leader that appended it, and its event.
/// Two logs that hold the same term at an index hold the same entry there
/// and before it (Raft's log matching), which is how the leader finds where
/// a follower's log diverges.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub term: u64,
    pub event: Event,
}

const BLANK: u8 = 0;
const MEMBERSHIP: u8 = 1;
const MESSAGE: u8 = 2;

/// `term (8) | kind (1) | Membership: bincode | Message: origin (8), payload`.
/// Hand-rolled so that a payload is copied, not decoded byte by byte: every
/// entry is read back several times a run by every member.
impl Record {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.term.to_le_bytes().to_vec();
        match &self.event {
            Event::Blank => out.push(BLANK),
            Event::Membership(m) => {
                out.push(MEMBERSHIP);
                bincode::serialize_into(&mut out, m).expect("encode a membership");
            }
            Event::Message { origin, payload } => {
                out.push(MESSAGE);
                out.extend_from_slice(&origin.to_le_bytes());
                out.extend_from_slice(payload);
            }
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Record, String> {
        let word = |at: usize| bytes.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        let term = word(0).ok_or("a log record without its term")?;
        let event = match bytes.get(8) {
            Some(&BLANK) => Event::Blank,
            Some(&MEMBERSHIP) => Event::Membership(bincode::deserialize(&bytes[9..]).map_err(|e| e.to_string())?),
            Some(&MESSAGE) => {
                let origin = word(9).ok_or("a message without its origin")?;
                Event::Message { origin, payload: bytes[17..].to_vec() }
            }
            other => return Err(format!("a log record of unknown kind {other:?}")),
        };
        Ok(Record { term, event })
    }

    /// Whether the encoded record is a membership (without decoding it).
    pub fn is_membership(bytes: &[u8]) -> bool {
        bytes.get(8) == Some(&MEMBERSHIP)
    }
}

/// The replicated state right after log entry `index` (the group's
/// `CheckpointRecord`): a restart resumes from one, a follower that lacks
/// the purged log is sent one (snapshot install).
#[derive(Clone, Debug)]
pub struct Checkpoint {
    pub index: u64,
    /// Term of the entry at `index` (0 for the empty prefix).
    pub term: u64,
    /// `GroupState::seqno` after `index`: what a restart compares with the
    /// position of its local data.
    pub position: Seqno,
    /// The membership in force at `index`.
    pub config: Option<Membership>,
    pub state: Vec<u8>,
}

/// `index | term | position | config length | config (bincode) | state`,
/// the state copied as is (it is `GroupState::encode`d already).
impl Checkpoint {
    pub fn encode(&self) -> Vec<u8> {
        let config = bincode::serialize(&self.config).expect("encode a membership");
        let mut out = Vec::with_capacity(32 + config.len() + self.state.len());
        for word in [self.index, self.term, self.position as u64, config.len() as u64] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&config);
        out.extend_from_slice(&self.state);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Checkpoint, String> {
        let word = |at: usize| bytes.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        let short = || "a checkpoint cut short".to_string();
        let (index, term, position, len) = (word(0), word(8), word(16), word(24));
        let (Some(index), Some(term), Some(position), Some(len)) = (index, term, position, len) else {
            return Err(short());
        };
        let config_end = 32usize.checked_add(len as usize).filter(|&e| e <= bytes.len()).ok_or_else(short)?;
        let config = bincode::deserialize(&bytes[32..config_end]).map_err(|e| format!("unreadable checkpoint: {e}"))?;
        Ok(Checkpoint { index, term, position: position as Seqno, config, state: bytes[config_end..].to_vec() })
    }
}
