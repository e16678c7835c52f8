//! One segment file: its name, what the log keeps in memory about it (a sparse index), and a
//! sequential reader of its records.
//!
//! ```text
//!   file:   [segment header][rec first][rec first+1] ... [rec last]
//!   memory: Segment { first, last, bytes, sparse: [(first, 24), (first+64, ..), ...] }
//! ```
//!
//! The sparse index keeps one `(index, offset)` entry per [`SPARSE_EVERY_RECORDS`] records,
//! or sooner once [`SPARSE_EVERY_BYTES`] were written since the last entry. A record is found
//! by reading forward from the entry at or before it; the rule bounds that walk to fewer than
//! 64 headers within the first 16 KiB, whatever the record sizes. Memory is 16 bytes per entry:
//! about 2.5 MB for a gigabyte of 100-byte records.

use crate::format::{self, Invalid, RecordHeader, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
use crate::storage::Storage;
use std::io;

/// A sparse index entry at least every this many records...
pub const SPARSE_EVERY_RECORDS: u64 = 64;
/// ...and at least every this many bytes.
pub const SPARSE_EVERY_BYTES: u64 = 16 * 1024;

/// Chunk of the short walks that only need headers (finding where to truncate).
pub(crate) const POINT_READ_CHUNK: usize = 32 * 1024;
/// Largest chunk of a sequential read (open, read_range).
pub(crate) const SCAN_CHUNK: usize = 1024 * 1024;

/// Public description of a segment, for monitoring and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    /// File name in the storage.
    pub name: String,
    /// First index the segment was started with.
    pub first: u64,
    /// Last index it holds (`None` only for a segment with no record).
    pub last: Option<u64>,
    /// Bytes of the file, its header included.
    pub bytes: u64,
}

/// `{prefix}.{first:020}.seg`: zero-padded so that name order is index order.
pub(crate) fn segment_name(prefix: &str, first: u64) -> String {
    format!("{prefix}.{first:020}.seg")
}

/// The first index a segment file name carries, if `name` is a segment of log `prefix`.
pub(crate) fn parse_segment_name(prefix: &str, name: &str) -> Option<u64> {
    let digits = name.strip_prefix(prefix)?.strip_prefix('.')?.strip_suffix(".seg")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SparseEntry {
    index: u64,
    offset: u64,
}

/// What the log knows about one segment file without reading it.
#[derive(Clone, Debug)]
pub(crate) struct Segment {
    pub(crate) name: String,
    pub(crate) first: u64,
    /// Last index held; `None` until the first record is noted.
    pub(crate) last: Option<u64>,
    /// Length of the file: everything in it is valid.
    pub(crate) bytes: u64,
    /// Holds data or a truncation not yet fsynced.
    pub(crate) dirty: bool,
    /// Ascending; the first record is always an entry.
    sparse: Vec<SparseEntry>,
}

impl Segment {
    /// A segment holding only its header.
    pub(crate) fn new(prefix: &str, first: u64) -> Segment {
        Segment {
            name: segment_name(prefix, first),
            first,
            last: None,
            bytes: SEGMENT_HEADER_LEN as u64,
            dirty: false,
            sparse: Vec::new(),
        }
    }

    /// The index the next record of this segment must have.
    pub(crate) fn next_index(&self) -> u64 {
        self.last.map_or(self.first, |last| last + 1)
    }

    pub(crate) fn holds(&self, index: u64) -> bool {
        self.last.is_some_and(|last| self.first <= index && index <= last)
    }

    /// Notes a record written (or found) at the end of the file.
    pub(crate) fn push_record(&mut self, index: u64, record_len: u64) {
        assert_eq!(index, self.next_index(), "records are noted in order");
        assert!(record_len >= RECORD_HEADER_LEN as u64);
        let offset = self.bytes;
        let due = match self.sparse.last() {
            None => true,
            Some(entry) => index - entry.index >= SPARSE_EVERY_RECORDS || offset - entry.offset >= SPARSE_EVERY_BYTES,
        };
        if due {
            self.sparse.push(SparseEntry { index, offset });
        }
        self.last = Some(index);
        self.bytes += record_len;
    }

    /// The sparse entry at or before `index`: where to start reading forward.
    pub(crate) fn entry_for(&self, index: u64) -> (u64, u64) {
        assert!(self.holds(index), "caller looks up indexes of this segment");
        let position = self.sparse.partition_point(|entry| entry.index <= index);
        assert!(position > 0, "the first record is always an entry");
        let entry = self.sparse[position - 1];
        (entry.index, entry.offset)
    }

    /// Bytes from the sparse entry at or before `index` to the next entry (or the end of the
    /// file): a window that holds record `index` whole.
    pub(crate) fn span_len(&self, index: u64) -> u64 {
        let (_, offset) = self.entry_for(index);
        let position = self.sparse.partition_point(|entry| entry.index <= index);
        let end = self.sparse.get(position).map_or(self.bytes, |next| next.offset);
        end - offset
    }

    /// Forgets every record after `index`; `len` is where record `index + 1` started.
    pub(crate) fn cut_after(&mut self, index: u64, len: u64) {
        assert!(index + 1 >= self.first && len >= SEGMENT_HEADER_LEN as u64);
        assert!(len <= self.bytes);
        self.sparse.retain(|entry| entry.index <= index);
        self.last = if index >= self.first { Some(index) } else { None };
        self.bytes = len;
    }

    pub(crate) fn index_entries(&self) -> usize {
        self.sparse.len()
    }

    pub(crate) fn info(&self) -> SegmentInfo {
        SegmentInfo { name: self.name.clone(), first: self.first, last: self.last, bytes: self.bytes }
    }
}

/// What the next bytes of a segment hold.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A record whose header passed its checks, at [`Scanner::offset`].
    Record(RecordHeader),
    /// The end of the readable bytes, exactly at a record boundary.
    End,
    /// The bytes end inside a record: inside its header, or before the end of a payload
    /// whose header is valid.
    Torn,
    /// The bytes at [`Scanner::offset`] are not a valid record header.
    Invalid(Invalid),
}

/// Reads records forward from an offset with few, large `pread`s. Nothing it reads is
/// trusted: lengths are checked against the header checksum, [`format::MAX_PAYLOAD`] and the
/// end of the file before anything is allocated.
pub(crate) struct Scanner<'a, S: Storage> {
    storage: &'a S,
    name: &'a str,
    /// Bytes past this offset are not read.
    end: u64,
    /// Offset of the record [`Scanner::next`] looks at.
    offset: u64,
    buffer: Vec<u8>,
    /// File offset of `buffer[0]`.
    buffer_start: u64,
    chunk: usize,
}

impl<'a, S: Storage> Scanner<'a, S> {
    pub(crate) fn new(storage: &'a S, name: &'a str, offset: u64, end: u64, chunk: usize) -> Self {
        assert!(offset <= end);
        Scanner { storage, name, end, offset, buffer: Vec::new(), buffer_start: offset, chunk }
    }

    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Looks at the record at the current offset without moving past it.
    pub(crate) fn next(&mut self) -> io::Result<Step> {
        let left = self.end - self.offset;
        if left == 0 {
            return Ok(Step::End);
        }
        if left < RECORD_HEADER_LEN as u64 {
            return Ok(Step::Torn);
        }
        let header = match format::decode_record_header(self.bytes(self.offset, RECORD_HEADER_LEN)?) {
            Ok(header) => header,
            Err(invalid) => return Ok(Step::Invalid(invalid)),
        };
        if header.record_len() > left {
            return Ok(Step::Torn);
        }
        Ok(Step::Record(header))
    }

    /// The payload of the record `next` just returned, checked against its checksum.
    pub(crate) fn payload(&mut self, header: &RecordHeader) -> io::Result<Result<&[u8], Invalid>> {
        let start = self.offset + RECORD_HEADER_LEN as u64;
        assert!(start + u64::from(header.len) <= self.end, "next checked the record fits");
        let payload = self.bytes(start, header.len as usize)?;
        Ok(header.verify_payload(payload).map(|()| payload))
    }

    /// Moves past the record `next` just returned.
    pub(crate) fn advance(&mut self, header: &RecordHeader) {
        assert!(self.offset + header.record_len() <= self.end);
        self.offset += header.record_len();
    }

    /// `len` bytes at `offset`, from the buffer, refilled from the file when they are not
    /// all in it. The caller has checked that they lie before `end`.
    fn bytes(&mut self, offset: u64, len: usize) -> io::Result<&[u8]> {
        let buffered_end = self.buffer_start + self.buffer.len() as u64;
        if offset < self.buffer_start || offset + len as u64 > buffered_end {
            let want = len.max(self.chunk) as u64;
            let read_len = want.min(self.end - offset) as usize;
            assert!(read_len >= len, "caller checked the bytes lie before end");
            self.buffer.clear();
            self.buffer.resize(read_len, 0);
            self.storage.read_at(self.name, offset, &mut self.buffer)?;
            self.buffer_start = offset;
        }
        let start = (offset - self.buffer_start) as usize;
        Ok(&self.buffer[start..start + len])
    }
}

/// True when every byte from `offset` to `end` is zero: a tail that a file system extended
/// but never filled (a torn write after power loss), not a damaged record.
pub(crate) fn zeros_to_end<S: Storage>(storage: &S, name: &str, offset: u64, end: u64) -> io::Result<bool> {
    let mut buffer = Vec::new();
    let mut position = offset;
    while position < end {
        let len = (end - position).min(SCAN_CHUNK as u64) as usize;
        buffer.resize(len, 0);
        storage.read_at(name, position, &mut buffer)?;
        if buffer.iter().any(|&byte| byte != 0) {
            return Ok(false);
        }
        position += len as u64;
    }
    Ok(true)
}

#[cfg(test)]
#[path = "segment_tests.rs"]
mod tests;
