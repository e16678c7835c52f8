//! Reading Galera's own cache file (`galera.cache`, Galera 4's ring buffer)
//! after a switch from Galera: which seqnos it holds, and which of them were
//! configuration changes rather than write-sets.
//!
//! Why: each clean departure from a Galera cluster is a configuration change
//! that takes a seqno, so the nodes of a cleanly stopped cluster end a few
//! seqnos apart. When the most advanced one founds a Tandem group, the others
//! are behind its position by seqnos that carried no data; knowing that, they
//! rejoin without a state transfer. Nothing here writes the file.
//!
//! The layout, as Galera 26.4 leaves it (facts checked on files it wrote):
//!
//! ```text
//! 0     preamble, 1024 bytes of text lines "key: value", NUL padded:
//!       Version, GID (the history's uuid), seqno_min, seqno_max,
//!       offset (file offset of the oldest buffer), synced (1 after a
//!       clean close; 0 while open or after a crash)
//! 1024  header, 256 bytes (not read here)
//! 1280  the ring: buffers, each led by a 24-byte header, little-endian:
//!         0 seqno_g i64 (> 0 once ordered; 0 or -1 otherwise)
//!         8 ctx     u64 (a pointer in memory; meaningless on disk)
//!        16 size    u32 (header included)
//!        20 flags   u16 (bit 0 released, bit 1 skipped)
//!        22 store   i8  (1: in the ring)
//!        23 type    i8  (0 write-set, 3 configuration change, ...)
//! ```
//!
//! Buffers run from `offset` until a zeroed header (the end); when the ring
//! has wrapped, they continue from 1280 up to `offset`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

const PREAMBLE_BYTES: usize = 1024;
const RING_START: u64 = 1024 + 256;
const HEADER_BYTES: u64 = 24;
const TYPE_WRITESET: i8 = 0;
const TYPE_CONFIGURATION_CHANGE: i8 = 3;
const STORE_IN_RING: i8 = 1;
const MAX_FLAGS: u16 = 3;

/// What an ordered buffer of the ring was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingAction {
    /// A write-set (transactions, TOI, streaming fragments): data.
    WriteSet,
    /// A configuration change: a view, no data.
    ConfigurationChange,
    /// Any other action type Galera stores with a seqno.
    Other(i8),
}

/// What a Galera cache file says of the history it cached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GaleraRing {
    /// The history's uuid (`GID`), as Galera writes it.
    pub gid: String,
    /// Closed cleanly: the preamble's `synced: 1`.
    pub synced: bool,
    /// The ordered buffers found, by seqno.
    pub actions: BTreeMap<i64, RingAction>,
}

impl GaleraRing {
    /// The highest seqno at or below `position` that may have carried data:
    /// below `position`, every seqno above the one returned is a
    /// configuration change in this cache. `position` itself when the cache
    /// does not show that seqno as a configuration change.
    pub fn last_write_at_or_below(&self, position: i64) -> i64 {
        let mut seqno = position;
        while seqno > 0 && self.actions.get(&seqno) == Some(&RingAction::ConfigurationChange) {
            seqno -= 1;
        }
        seqno
    }
}

/// Reads the cache at `path`. Errors say what is wrong with the file; a
/// caller treats any of them as "nothing known".
pub fn read_galera_ring(path: &Path) -> Result<GaleraRing, String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let len = file.metadata().map_err(|e| format!("{}: {e}", path.display()))?.len();
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut preamble = vec![0u8; PREAMBLE_BYTES];
    reader.read_exact(&mut preamble).map_err(|e| format!("{}: no preamble: {e}", path.display()))?;
    let preamble = Preamble::parse(&preamble).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut actions = BTreeMap::new();
    if preamble.synced {
        let offset = preamble.offset.unwrap_or(RING_START);
        if offset < RING_START || offset >= len {
            return Err(format!("{}: offset {offset} is outside the ring", path.display()));
        }
        walk(&mut reader, offset, len, &mut actions).map_err(|e| format!("{}: {e}", path.display()))?;
        if offset > RING_START {
            // Wrapped: the newer buffers start over at the ring's start.
            walk(&mut reader, RING_START, offset, &mut actions).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(GaleraRing { gid: preamble.gid, synced: preamble.synced, actions })
}

struct Preamble {
    gid: String,
    synced: bool,
    offset: Option<u64>,
}

impl Preamble {
    fn parse(bytes: &[u8]) -> Result<Preamble, String> {
        let text = bytes.split(|&b| b == 0).next().unwrap_or_default();
        let text = std::str::from_utf8(text).map_err(|_| "the preamble is not text: not a Galera cache".to_string())?;
        let field = |key: &str| {
            text.lines().find_map(|l| l.split_once(':').filter(|(k, _)| k.trim() == key).map(|(_, v)| v.trim()))
        };
        let version = field("Version").ok_or("no 'Version:' in the preamble: not a Galera cache")?;
        if version != "2" {
            return Err(format!("Galera cache version {version}; only version 2 (Galera 4) is read"));
        }
        let gid = field("GID").ok_or("no 'GID:' in the preamble")?.to_string();
        let synced = field("synced") == Some("1");
        let offset = match field("offset") {
            Some(v) => Some(v.parse().map_err(|_| format!("offset '{v}' is not a number"))?),
            None => None,
        };
        Ok(Preamble { gid, synced, offset })
    }
}

/// Follows the buffers from `from` while their headers are sound, up to
/// `end`; records every ordered one.
fn walk<R: Read + Seek>(
    reader: &mut R,
    from: u64,
    end: u64,
    actions: &mut BTreeMap<i64, RingAction>,
) -> Result<(), String> {
    let mut at = from;
    reader.seek(SeekFrom::Start(at)).map_err(|e| e.to_string())?;
    let mut header = [0u8; HEADER_BYTES as usize];
    while at + HEADER_BYTES <= end {
        reader.read_exact(&mut header).map_err(|e| format!("reading at {at}: {e}"))?;
        let Some(buffer) = BufferHeader::parse(&header) else { break };
        if at + buffer.size > end {
            break;
        }
        if buffer.seqno > 0 {
            let action = match buffer.action {
                TYPE_WRITESET => RingAction::WriteSet,
                TYPE_CONFIGURATION_CHANGE => RingAction::ConfigurationChange,
                other => RingAction::Other(other),
            };
            // The same seqno twice would be a cache we do not understand:
            // then it counts as data, which costs a transfer, never data.
            actions.entry(buffer.seqno).and_modify(|a| *a = RingAction::WriteSet).or_insert(action);
        }
        reader.seek_relative((buffer.size - HEADER_BYTES) as i64).map_err(|e| e.to_string())?;
        at += buffer.size;
    }
    Ok(())
}

struct BufferHeader {
    seqno: i64,
    size: u64,
    action: i8,
}

impl BufferHeader {
    /// None at the end of the buffers: a zeroed or implausible header.
    fn parse(h: &[u8; HEADER_BYTES as usize]) -> Option<BufferHeader> {
        let seqno = i64::from_le_bytes(h[0..8].try_into().ok()?);
        let size = u32::from_le_bytes(h[16..20].try_into().ok()?) as u64;
        let flags = u16::from_le_bytes(h[20..22].try_into().ok()?);
        let (store, action) = (h[22] as i8, h[23] as i8);
        let sound = size >= HEADER_BYTES && size.is_multiple_of(8) && flags <= MAX_FLAGS && store == STORE_IN_RING;
        sound.then_some(BufferHeader { seqno, size, action })
    }
}

#[cfg(test)]
#[path = "galera_ring_tests.rs"]
mod tests;
