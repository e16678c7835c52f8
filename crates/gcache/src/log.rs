//! The segmented record log: dense u64 indexes, opaque payloads, bounded by bytes on disk
//! (the caller purges) and in memory (a sparse index per segment).
//!
//! ```text
//!  append ──► one buffer per segment touched ──► one write each (page cache)
//!  sync   ──► fsync dirty segments, then the directory if files came or went
//!  read   ──► sparse entry at or before the index ──► pread forward, verify checksum
//!  purge  ──► logical first index moves; whole old segments are deleted
//!  truncate_after ──► later segments removed, last one cut; both fsynced at once
//! ```
//!
//! Invariants (checked where they matter): segments are contiguous in index, every segment
//! in memory holds at least one record, and each segment's `bytes` is its file's length.

use crate::error::LogError;
use crate::format::{self, RecordHeader, MAX_PAYLOAD, RECORD_HEADER_LEN};
use crate::recovery::{self, RecoveryReport};
use crate::segment::{self, Scanner, Segment, SegmentInfo, Step};
use crate::storage::{self, Storage};
use std::collections::VecDeque;
use std::{fmt, io};

/// How a log is laid out and synced.
#[derive(Clone, Debug)]
pub struct LogOptions {
    /// File-name prefix of the segment files in the storage, e.g. "log" ->
    /// "log.00000000000000000001.seg".
    pub name: String,
    /// A segment is sealed and a new one started once it holds at least this many bytes.
    /// One append never splits a record, so a segment can exceed it by one record.
    pub segment_bytes: u64,
}

impl Default for LogOptions {
    fn default() -> LogOptions {
        LogOptions { name: "log".to_string(), segment_bytes: 64 * 1024 * 1024 }
    }
}

/// A log just opened, and what its recovery found.
pub struct Opened<S: Storage> {
    /// The log, holding the valid prefix recovery kept.
    pub log: SegmentLog<S>,
    /// What recovery found and cut.
    pub recovery: RecoveryReport,
}

/// A durable log of records keyed by a dense u64 index. See the crate docs for the format
/// and the crash-safety argument.
///
/// Reads take `&self` and use positional reads only, so a caller may share the log behind a
/// read-write lock and read from many threads.
pub struct SegmentLog<S: Storage> {
    storage: S,
    options: LogOptions,
    /// Contiguous, oldest first; each holds at least one record. Empty: the log is empty.
    segments: VecDeque<Segment>,
    /// First index not purged. Only meaningful while `segments` is not empty; may be
    /// `last + 1` when every record was purged.
    first_index: u64,
    /// A segment was created or removed since the last directory fsync.
    dir_dirty: bool,
    /// Set when a failed write could not be undone or an fsync failed: memory and disk may
    /// disagree, so writes are refused until the log is reopened (and re-validated).
    broken: Option<String>,
}

/// One segment's share of an append: the bytes of one write.
struct Chunk {
    /// `Some(first)`: the chunk starts a new segment (and begins with its header).
    new_segment: Option<u64>,
    bytes: Vec<u8>,
    /// Index and encoded length of each record in `bytes`.
    records: Vec<(u64, u64)>,
}

impl<S: Storage> SegmentLog<S> {
    /// Opens (creating if empty) and validates every segment: scans records, checks
    /// checksums and index continuity, truncates the invalid tail and reports it. Never
    /// panics on bad files.
    pub fn open(storage: S, options: LogOptions) -> Result<Opened<S>, LogError> {
        storage::check_name(&options.name)?;
        let (segments, recovery) = recovery::recover(&storage, &options)?;
        let first_index = segments.front().map_or(0, |segment| segment.first);
        let log = SegmentLog { storage, options, segments, first_index, dir_dirty: false, broken: None };
        Ok(Opened { log, recovery })
    }

    /// First index not purged; `None` for an empty log. After `purge_upto(last)` it is
    /// `last + 1`: no record is left, but the log still knows where it continues.
    pub fn first_index(&self) -> Option<u64> {
        (!self.segments.is_empty()).then_some(self.first_index)
    }

    /// Index of the last record; `None` for an empty log.
    pub fn last_index(&self) -> Option<u64> {
        self.segments.back().and_then(|segment| segment.last)
    }

    /// Appends records (index must be last+1; on an empty log any index starts it).
    /// Written through to the OS with one write per segment touched (normally one per call),
    /// not fsynced, except that a segment is fsynced when it is sealed (when the append
    /// starts the next one), so only the last segment can ever have a torn tail.
    ///
    /// Invalid input (a gap, an oversized payload) writes nothing. On an I/O error the
    /// failed write is cut off again; records of segments written before it stay, and
    /// `last_index()` tells how far the log got.
    pub fn append<'a>(&mut self, records: impl IntoIterator<Item = (u64, &'a [u8])>) -> Result<(), LogError> {
        self.check_usable()?;
        for chunk in self.plan_append(records)? {
            self.write_chunk(chunk)?;
        }
        Ok(())
    }

    /// fsync of everything appended so far (data and, after a new segment or removal, the
    /// directory). After a failed fsync the kernel may have dropped the unwritten pages, so
    /// a retry could falsely succeed: the log refuses writes until reopened.
    pub fn sync(&mut self) -> Result<(), LogError> {
        self.check_usable()?;
        for position in 0..self.segments.len() {
            if self.segments[position].dirty {
                let name = self.segments[position].name.clone();
                self.storage.sync_file(&name).map_err(|e| self.fail(e, "fsync"))?;
                self.segments[position].dirty = false;
            }
        }
        if self.dir_dirty {
            self.storage.sync_dir().map_err(|e| self.fail(e, "directory fsync"))?;
            self.dir_dirty = false;
        }
        Ok(())
    }

    /// One record, checksum-verified. Never returns altered bytes.
    pub fn read(&self, index: u64) -> Result<Vec<u8>, LogError> {
        let segment = self.segment_of(index)?;
        let (entry, offset) = segment.entry_for(index);
        // The span from the sparse entry to the next holds the record whole: one read.
        let chunk = segment.span_len(index).min(segment::SCAN_CHUNK as u64) as usize;
        let mut scanner = Scanner::new(&self.storage, &segment.name, offset, segment.bytes, chunk);
        for expected in entry..index {
            let header = expect_record(&mut scanner, segment, expected)?;
            scanner.advance(&header);
        }
        let header = expect_record(&mut scanner, segment, index)?;
        Ok(verified_payload(&mut scanner, segment, &header)?.to_vec())
    }

    /// Records from..=to in order. Stops before a record that would take the payload total
    /// above `max_bytes`, but always returns at least one record when the range is
    /// non-empty. `Missing` if `from` is below the first or `to` above the last index.
    pub fn read_range(&self, from: u64, to: u64, max_bytes: usize) -> Result<Vec<(u64, Vec<u8>)>, LogError> {
        let mut records = Vec::new();
        if from > to {
            return Ok(records);
        }
        self.segment_of(to)?;
        let mut next = from;
        let mut total = 0usize;
        while next <= to {
            let segment = self.segment_of(next)?;
            let last = to.min(segment.last.unwrap_or(next));
            let full = read_segment_range(&self.storage, segment, (next, last), max_bytes, &mut records, &mut total)?;
            if full {
                break;
            }
            next = last + 1;
        }
        Ok(records)
    }

    /// Drops every record after `index` (`None`: all records). Must leave no hole, so it is
    /// refused (`Missing`) for an index below `first_index() - 1`. Made durable before it
    /// returns: otherwise a crash could bring old records back behind newer ones.
    pub fn truncate_after(&mut self, index: Option<u64>) -> Result<(), LogError> {
        self.check_usable()?;
        let Some(last) = self.last_index() else {
            return Ok(());
        };
        if let Some(index) = index {
            if index >= last {
                return Ok(());
            }
            if index + 1 < self.first_index {
                return Err(LogError::Missing(index));
            }
        }
        let mut removed = false;
        // Newest first: a crash in the middle leaves a prefix.
        while let Some(segment) = self.segments.back() {
            if index.is_some_and(|index| segment.first <= index) {
                break;
            }
            self.storage.remove(&segment.name)?;
            self.segments.pop_back();
            self.dir_dirty = true;
            removed = true;
        }
        if removed {
            self.storage.sync_dir().map_err(|e| self.fail(e, "directory fsync"))?;
            self.dir_dirty = false;
        }
        match (index, self.last_index()) {
            (Some(index), Some(last)) if last > index => self.cut_last_segment_after(index),
            _ => Ok(()),
        }
    }

    /// Logically drops every record <= index; deletes segment files all of whose records
    /// are <= index, except the last one (it holds `last_index()`, so the log still knows
    /// where it continues after a reopen). Segment-granular on disk: after a reopen,
    /// `first_index()` may be lower than index+1. Never purges past `last_index()`. The
    /// deletions become durable at the next `sync`.
    pub fn purge_upto(&mut self, index: u64) -> Result<(), LogError> {
        self.check_usable()?;
        let Some(last) = self.last_index() else {
            return Ok(());
        };
        let index = index.min(last);
        if index < self.first_index {
            return Ok(());
        }
        self.first_index = index + 1;
        // Oldest first: whatever a crash keeps of the removals, the rest is contiguous.
        while self.segments.len() > 1 && self.segments[0].last.is_some_and(|l| l <= index) {
            self.storage.remove(&self.segments[0].name)?;
            self.segments.pop_front();
            self.dir_dirty = true;
        }
        Ok(())
    }

    /// Bytes of the segment files currently on disk.
    pub fn disk_bytes(&self) -> u64 {
        self.segments.iter().map(|segment| segment.bytes).sum()
    }

    /// The segment files, oldest first.
    pub fn segments(&self) -> Vec<SegmentInfo> {
        self.segments.iter().map(Segment::info).collect()
    }

    /// Entries of the in-memory sparse index, all segments together: the log's memory
    /// grows with this, not with the number of records.
    pub fn index_entries(&self) -> usize {
        self.segments.iter().map(Segment::index_entries).sum()
    }

    /// The storage the log lives in (blobs may share it).
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// The options the log was opened with.
    pub fn options(&self) -> &LogOptions {
        &self.options
    }

    fn check_usable(&self) -> Result<(), LogError> {
        match &self.broken {
            None => Ok(()),
            Some(reason) => Err(LogError::Io(io::Error::other(format!(
                "log {:?} refuses writes until reopened: {reason}",
                self.options.name
            )))),
        }
    }

    /// Marks the log broken after an error that leaves memory and disk possibly apart.
    fn fail(&mut self, error: io::Error, what: &str) -> LogError {
        self.broken = Some(format!("{what} failed: {error}"));
        LogError::Io(error)
    }

    /// The segment holding `index`, or `Missing` if the log does not hold it.
    fn segment_of(&self, index: u64) -> Result<&Segment, LogError> {
        let (Some(first), Some(last)) = (self.first_index(), self.last_index()) else {
            return Err(LogError::Missing(index));
        };
        if index < first || index > last {
            return Err(LogError::Missing(index));
        }
        let position = self.segments.partition_point(|segment| segment.first <= index);
        assert!(position > 0, "first_index is at or after the first segment's first");
        let segment = &self.segments[position - 1];
        assert!(segment.holds(index), "segments are contiguous");
        Ok(segment)
    }

    /// Validates and encodes an append into one chunk per segment it touches. Nothing is
    /// written, so a refused record leaves the log as it was.
    fn plan_append<'a>(&self, records: impl IntoIterator<Item = (u64, &'a [u8])>) -> Result<Vec<Chunk>, LogError> {
        let mut expected = self.last_index().map(|last| last + 1);
        let mut chunks: Vec<Chunk> = Vec::new();
        // Bytes the segment the next record goes to will hold; None: there is none yet.
        let mut segment_bytes = self.segments.back().map(|segment| segment.bytes);
        for (index, payload) in records {
            if payload.len() > MAX_PAYLOAD {
                return Err(LogError::TooLarge(payload.len()));
            }
            if index == u64::MAX || expected.is_some_and(|expected| expected != index) {
                return Err(LogError::NotContiguous { expected: expected.unwrap_or(0), got: index });
            }
            let full = segment_bytes.is_none_or(|bytes| bytes >= self.options.segment_bytes);
            if full || chunks.is_empty() {
                let new_segment = full.then_some(index);
                let mut bytes = Vec::new();
                if full {
                    bytes.extend_from_slice(&format::encode_segment_header(index));
                    segment_bytes = Some(bytes.len() as u64);
                }
                chunks.push(Chunk { new_segment, bytes, records: Vec::new() });
            }
            let record_len = (RECORD_HEADER_LEN + payload.len()) as u64;
            if let (Some(chunk), Some(bytes)) = (chunks.last_mut(), segment_bytes.as_mut()) {
                format::encode_record(&mut chunk.bytes, index, payload);
                chunk.records.push((index, record_len));
                *bytes += record_len;
            }
            expected = Some(index + 1);
        }
        Ok(chunks)
    }

    /// Writes one chunk with one write; on failure, cuts the file back to where it was.
    fn write_chunk(&mut self, chunk: Chunk) -> Result<(), LogError> {
        if let Some(first) = chunk.new_segment {
            self.seal_last_segment()?;
            let segment = Segment::new(&self.options.name, first);
            self.storage.create(&segment.name)?;
            if self.segments.is_empty() {
                self.first_index = first;
            }
            self.segments.push_back(segment);
            self.dir_dirty = true;
        }
        let Some(segment) = self.segments.back_mut() else {
            unreachable!("a chunk either starts a segment or goes to the last one");
        };
        let old_len = if chunk.new_segment.is_some() { 0 } else { segment.bytes };
        if let Err(error) = self.storage.append(&segment.name, &chunk.bytes) {
            return Err(self.undo_write(chunk.new_segment.is_some(), old_len, error));
        }
        for (index, record_len) in chunk.records {
            segment.push_record(index, record_len);
        }
        segment.dirty = true;
        assert_eq!(segment.bytes, old_len + chunk.bytes.len() as u64);
        Ok(())
    }

    /// fsyncs the last segment before a new one is started after it, so that a sealed
    /// segment is always whole on disk: a later segment cannot exist behind a torn one, and
    /// recovery can call a torn sealed segment what it is, corruption.
    fn seal_last_segment(&mut self) -> Result<(), LogError> {
        let Some(segment) = self.segments.back().filter(|segment| segment.dirty) else {
            return Ok(());
        };
        let name = segment.name.clone();
        self.storage.sync_file(&name).map_err(|e| self.fail(e, "fsync"))?;
        if let Some(segment) = self.segments.back_mut() {
            segment.dirty = false;
        }
        Ok(())
    }

    /// Cuts off whatever part of a failed write landed, so memory and file agree again.
    fn undo_write(&mut self, new_segment: bool, old_len: u64, error: io::Error) -> LogError {
        let Some(segment) = self.segments.back() else {
            unreachable!("the failed write went to the last segment");
        };
        let name = segment.name.clone();
        let undone = if new_segment {
            self.segments.pop_back();
            self.storage.remove(&name)
        } else {
            self.storage.truncate(&name, old_len)
        };
        if let Err(undo_error) = undone {
            self.broken = Some(format!("could not undo a failed write to {name}: {undo_error}"));
        }
        LogError::Io(error)
    }

    /// Cuts the last segment after `index`, which it holds, and makes the cut durable.
    fn cut_last_segment_after(&mut self, index: u64) -> Result<(), LogError> {
        let Some(segment) = self.segments.back() else {
            unreachable!("the caller saw a last index");
        };
        assert!(segment.first <= index && segment.holds(index + 1));
        let len = record_offset(&self.storage, segment, index + 1)?;
        let name = segment.name.clone();
        self.storage.truncate(&name, len)?;
        if let Some(segment) = self.segments.back_mut() {
            segment.cut_after(index, len);
        }
        self.storage.sync_file(&name).map_err(|e| self.fail(e, "fsync"))?;
        if let Some(segment) = self.segments.back_mut() {
            segment.dirty = false;
        }
        Ok(())
    }
}

impl<S: Storage> fmt::Debug for Opened<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opened").field("log", &self.log).field("recovery", &self.recovery).finish()
    }
}

impl<S: Storage> fmt::Debug for SegmentLog<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SegmentLog")
            .field("options", &self.options)
            .field("first_index", &self.first_index())
            .field("last_index", &self.last_index())
            .field("segments", &self.segments.len())
            .field("broken", &self.broken)
            .finish()
    }
}

/// A record error met after open: the bytes changed under us.
fn corrupt(segment: &Segment, offset: u64, index: u64, what: impl fmt::Display) -> LogError {
    let reason = format!("segment {} offset {offset}: record {index}: {what}", segment.name);
    LogError::Corrupt { index, reason }
}

/// The header of the record at the scanner, which must be record `expected`.
fn expect_record<S: Storage>(
    scanner: &mut Scanner<'_, S>,
    segment: &Segment,
    expected: u64,
) -> Result<RecordHeader, LogError> {
    let offset = scanner.offset();
    match scanner.next()? {
        Step::Record(header) if header.index == expected => Ok(header),
        Step::Record(header) => Err(corrupt(segment, offset, expected, format!("found index {}", header.index))),
        Step::End | Step::Torn => Err(corrupt(segment, offset, expected, "the file ends early")),
        Step::Invalid(invalid) => Err(corrupt(segment, offset, expected, invalid)),
    }
}

fn verified_payload<'s, S: Storage>(
    scanner: &'s mut Scanner<'_, S>,
    segment: &Segment,
    header: &RecordHeader,
) -> Result<&'s [u8], LogError> {
    let offset = scanner.offset();
    scanner.payload(header)?.map_err(|invalid| corrupt(segment, offset, header.index, invalid))
}

/// Byte offset of record `index` in `segment`, walking headers from the sparse entry.
fn record_offset<S: Storage>(storage: &S, segment: &Segment, index: u64) -> Result<u64, LogError> {
    let (entry, offset) = segment.entry_for(index);
    let chunk = segment::POINT_READ_CHUNK;
    let mut scanner = Scanner::new(storage, &segment.name, offset, segment.bytes, chunk);
    for expected in entry..index {
        let header = expect_record(&mut scanner, segment, expected)?;
        scanner.advance(&header);
    }
    expect_record(&mut scanner, segment, index)?;
    Ok(scanner.offset())
}

/// Appends records `range.0..=range.1` of one segment to `records`, within `max_bytes`.
/// Returns true when it stopped because the next record would not fit.
fn read_segment_range<S: Storage>(
    storage: &S,
    segment: &Segment,
    range: (u64, u64),
    max_bytes: usize,
    records: &mut Vec<(u64, Vec<u8>)>,
    total: &mut usize,
) -> Result<bool, LogError> {
    let (from, to) = range;
    let (entry, offset) = segment.entry_for(from);
    let chunk = max_bytes.clamp(segment::POINT_READ_CHUNK, segment::SCAN_CHUNK);
    let mut scanner = Scanner::new(storage, &segment.name, offset, segment.bytes, chunk);
    for expected in entry..=to {
        let header = expect_record(&mut scanner, segment, expected)?;
        if expected >= from {
            let len = header.len as usize;
            if !records.is_empty() && total.saturating_add(len) > max_bytes {
                return Ok(true);
            }
            let payload = verified_payload(&mut scanner, segment, &header)?;
            records.push((expected, payload.to_vec()));
            *total += len;
        }
        scanner.advance(&header);
    }
    Ok(false)
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
