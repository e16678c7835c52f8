//! Durable storage under Tandem's group log, which doubles as Galera's "gcache": the
//! on-disk cache of ordered write-sets that lets a restarted node catch up by IST.
//!
//! The crate knows nothing of Raft or of the engine. It stores
//!
//! - **records**: opaque payloads keyed by a dense `u64` index, in a [`SegmentLog`] of
//!   segment files. Bounded by bytes on disk (the caller purges by index and reads
//!   [`SegmentLog::disk_bytes`]) and in memory (a sparse index, [`segment`]);
//! - **blobs**: small named files replaced atomically ([`write_blob`], [`read_blob`]).
//!
//! Everything goes through a [`Storage`]: a real directory ([`FsStorage`]) or an in-memory
//! one that models crashes and corruption ([`MemStorage`]), so the deterministic simulation
//! runs this very code. Nothing here is random or reads a clock.
//!
//! ```
//! use tandem_gcache::{LogOptions, MemStorage, SegmentLog};
//!
//! let storage = MemStorage::new();
//! let options = LogOptions { name: "log".into(), segment_bytes: 1 << 20 };
//! let mut log = SegmentLog::open(storage.clone(), options.clone())?.log;
//! log.append([(1, &b"first"[..]), (2, &b"second"[..])])?;
//! log.sync()?;
//! assert_eq!(log.read(2)?, b"second");
//!
//! // A power loss right now: synced bytes survive, the rest is cut anywhere.
//! let after = storage.crash(&mut |_name: &str, synced, _current| synced);
//! let reopened = SegmentLog::open(after, options)?;
//! assert_eq!(reopened.log.last_index(), Some(2));
//! assert_eq!(reopened.recovery.damage, None);
//! # Ok::<(), tandem_gcache::LogError>(())
//! ```
//!
//! # On-disk format
//!
//! A log named `log` is the files `log.<first index, 20 digits>.seg`, contiguous in index.
//! All integers are little-endian; CRC-32 is IEEE (`crc32fast`).
//!
//! ```text
//! segment file   [segment header, 24 bytes][record][record]...
//!
//! segment header  0       8             16        20        24
//!                 +-------+-------------+---------+---------+
//!                 | magic | first index | version | crc     |   crc = CRC-32(bytes 0..20)
//!                 |TANDMSEG  u64        | u32 = 1 | u32     |
//!                 +-------+-------------+---------+---------+
//!
//! record          0      4     6      8         16      20         24         28
//!                 +------+-----+------+---------+-------+----------+----------+---------+
//!                 |magic |vers.|flags | index   | len   | data_crc | head_crc | payload |
//!                 |"TGRC"|u16=1|u16=0 | u64     | u32   | u32      | u32      | len B   |
//!                 +------+-----+------+---------+-------+----------+----------+---------+
//!                 data_crc = CRC-32(bytes 0..20 ++ payload)   header fields and payload
//!                 head_crc = CRC-32(bytes 0..24)              lets `len` be trusted first
//!
//! blob file       0          8         12     16     20
//!                 +----------+---------+------+------+---------+
//!                 | magic    | version | len  | crc  | payload |   crc = CRC-32(0..16 ++ payload)
//!                 | TANDBLOB | u32 = 1 | u32  | u32  | len B   |   file length must be 20 + len
//!                 +----------+---------+------+------+---------+
//! ```
//!
//! Payloads are at most [`format::MAX_PAYLOAD`] (1 GiB), checked before any allocation.
//! A record carries its own index, so a record in the wrong place is caught, and the
//! segment header names its first index, so a file under the wrong name is caught.
//!
//! # Crash safety
//!
//! Writes only ever append to the last segment (or create a new one), and a segment is
//! fsynced when the next one is started, so a torn write can only damage the tail of the
//! last segment. [`SegmentLog::open`] reads every record once, checks both
//! checksums and that each index is the previous one plus one, and keeps the longest valid
//! prefix: it cuts the first bad record and everything after it, renames later whole
//! segments to `*.damaged`, makes that repair durable, and says what it cut in
//! [`RecoveryReport`] ([`Damage::TornTail`] for an incomplete or zero-filled tail of the last
//! segment, [`Damage::Corrupt`] for anything else). So:
//!
//! - **kill -9** (the process dies, the OS lives): every `append` that returned is in the
//!   page cache and survives, synced or not. At most the one write in progress is partial,
//!   and recovery cuts it.
//! - **power loss**: everything before the last [`SegmentLog::sync`] that returned survives
//!   (segment data fsynced, then the directory, so new segment files and removals are
//!   durable too). Of later appends, any prefix may survive, cut at any byte; recovery
//!   returns a prefix of what was appended that contains everything synced. Purges become
//!   durable at the next `sync` (before that a crash may bring purged segments back, which
//!   only lowers `first_index`). [`SegmentLog::truncate_after`] is made durable before it
//!   returns, so that cut records cannot come back behind newer ones.
//! - **a flipped byte** anywhere is detected by a checksum (CRC-32 catches every error of up
//!   to 32 consecutive bits): at open it ends the log there, after open
//!   [`SegmentLog::read`] answers [`LogError::Corrupt`]. Bytes are never returned unverified.
//! - **garbage or truncated files** are validated like any other and answered with a report
//!   or an error naming the file and offset, never a panic.
//!
//! [`MemStorage`] models exactly these outcomes (its docs give the details): `crash`
//! is a power loss (unsynced appends cut where the caller chooses, unsynced truncations and
//! directory operations undone, or a prefix of the latter kept), `kill` is kill -9. The
//! tests crash it at every byte and flip every byte, and check the claims above.
//!
//! Blobs are replaced through a temp file and a rename; with `sync` the new value is
//! durable when [`write_blob`] returns, without it a crash leaves the old value, the new
//! one, or a torn file that [`read_blob`] reports as [`LogError::Corrupt`].

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod blob;
mod error;
pub mod format;
pub mod galera_ring;
mod log;
mod recovery;
pub mod segment;
pub mod storage;

pub use blob::{list_blobs, read_blob, remove_blob, write_blob};
pub use error::LogError;
pub use galera_ring::{read_galera_ring, GaleraRing, RingAction};
pub use log::{LogOptions, Opened, SegmentLog};
pub use recovery::{Damage, RecoveryReport, DAMAGED_SUFFIX};
pub use segment::SegmentInfo;
pub use storage::{FsStorage, MemStorage, Storage};
