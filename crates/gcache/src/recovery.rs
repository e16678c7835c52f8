//! Opening a log: validate every segment, keep the longest valid contiguous prefix, cut the
//! rest, and say what was cut.
//!
//! Every record is read once, in large sequential reads, and checked: header checksum,
//! payload checksum, and index = previous + 1 (inside and across segments). The first record
//! that fails ends the log; the repair is made durable before the log is handed out, so a
//! crash right after open cannot bring the cut bytes back under new records.
//!
//! What counts as a torn tail rather than corruption: the bytes end inside a record (its
//! header, or the payload of a header that checks), or the rest of the file is zeros (a
//! file system extended it but the data never landed), in the last segment only. Anything
//! else, or the same in a sealed segment, is corruption.

use crate::error::LogError;
use crate::format::{self, SEGMENT_HEADER_LEN};
use crate::log::LogOptions;
use crate::segment::{self, Scanner, Segment, Step};
use crate::storage::Storage;
use std::collections::VecDeque;

/// What [`crate::SegmentLog::open`] found and did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segment files in the log after recovery.
    pub segments: usize,
    /// Records in them (purged ones that are still on disk included).
    pub records: u64,
    /// Bytes cut off at the end because they did not form whole valid records.
    pub truncated_bytes: u64,
    /// What was wrong, if anything was cut (None: clean).
    pub damage: Option<Damage>,
    /// Whole segment files that followed corruption, renamed to `<name>.damaged` for
    /// inspection instead of deleted. Their bytes are counted in `truncated_bytes`.
    pub set_aside: Vec<String>,
}

/// The first problem recovery met; everything from there on was discarded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Damage {
    /// An incomplete record at the very end of the last segment (typical after a crash
    /// while writing), or a zero-filled tail there.
    TornTail {
        /// File name of the segment.
        segment: String,
        /// Where the incomplete record started: the file was cut there.
        offset: u64,
    },
    /// A record whose checksum, magic, length or index is wrong, or an index gap between or
    /// inside segments. Everything from there on is discarded (later segments are renamed
    /// aside), so the log stays a contiguous prefix.
    Corrupt {
        /// File name of the segment.
        segment: String,
        /// Where the bad record (or, at 0, the bad segment) starts.
        offset: u64,
        /// Which check failed.
        reason: String,
    },
}

/// Suffix of a segment file set aside after corruption. A later set-aside of a file with the
/// same name replaces it: the evidence kept is of the latest damage.
pub const DAMAGED_SUFFIX: &str = ".damaged";

/// One segment file after validation.
struct Checked {
    /// The valid part; `None` when not even the header is usable.
    segment: Option<Segment>,
    file_len: u64,
    damage: Option<Damage>,
}

/// Validates the segments of log `options.name` in `storage` and repairs them.
pub(crate) fn recover<S: Storage>(
    storage: &S,
    options: &LogOptions,
) -> Result<(VecDeque<Segment>, RecoveryReport), LogError> {
    let files = list_segments(storage, &options.name)?;
    let mut segments: VecDeque<Segment> = VecDeque::new();
    let mut report =
        RecoveryReport { segments: 0, records: 0, truncated_bytes: 0, damage: None, set_aside: Vec::new() };
    let mut dir_changed = false;
    for (position, (name, first)) in files.iter().enumerate() {
        let expected = segments.back().map(Segment::next_index);
        let is_last = position + 1 == files.len();
        let checked = check_segment(storage, options, name, *first, expected, is_last)?;
        if checked.damage.is_none() {
            segments.extend(checked.segment);
            continue;
        }
        let later = &files[position + 1..];
        dir_changed |= repair(storage, name, checked, later, &mut segments, &mut report)?;
        break;
    }
    dir_changed |= drop_trailing_empty(storage, &mut segments)?;
    if dir_changed {
        storage.sync_dir()?;
    }
    report.segments = segments.len();
    report.records = segments.iter().map(|s| s.next_index() - s.first).sum();
    Ok((segments, report))
}

/// Cuts the log at the damage `checked` found in segment `name`: later segments are set
/// aside (newest first, so that a crash in the middle of the repair still leaves a prefix),
/// the damaged one is cut to its valid records, or goes whole if none. Returns whether the
/// directory changed.
fn repair<S: Storage>(
    storage: &S,
    name: &str,
    checked: Checked,
    later: &[(String, u64)],
    segments: &mut VecDeque<Segment>,
    report: &mut RecoveryReport,
) -> Result<bool, LogError> {
    let corrupt = matches!(checked.damage, Some(Damage::Corrupt { .. }));
    report.damage = checked.damage;
    for (later, _) in later.iter().rev() {
        report.truncated_bytes += storage.len(later)?;
        set_aside(storage, later, report)?;
    }
    let kept = checked.segment.filter(|segment| segment.last.is_some());
    report.truncated_bytes += checked.file_len - kept.as_ref().map_or(0, |s| s.bytes);
    match kept {
        Some(segment) => {
            assert!(segment.bytes < checked.file_len, "damage means bytes were cut");
            storage.truncate(&segment.name, segment.bytes)?;
            storage.sync_file(&segment.name)?;
            segments.push_back(segment);
            Ok(!later.is_empty())
        }
        None if corrupt => {
            set_aside(storage, name, report)?;
            Ok(true)
        }
        None => {
            storage.remove(name)?;
            Ok(true)
        }
    }
}

/// The segment files of log `prefix`, in index order. Files that merely look alike (other
/// prefixes, other digit counts, numbers beyond u64) are not ours and are left alone.
fn list_segments<S: Storage>(storage: &S, prefix: &str) -> Result<Vec<(String, u64)>, LogError> {
    let mut files: Vec<(String, u64)> = storage
        .list()?
        .into_iter()
        .filter_map(|name| segment::parse_segment_name(prefix, &name).map(|first| (name, first)))
        .collect();
    files.sort_by_key(|(_, first)| *first);
    Ok(files)
}

fn set_aside<S: Storage>(storage: &S, name: &str, report: &mut RecoveryReport) -> Result<(), LogError> {
    let aside = format!("{name}{DAMAGED_SUFFIX}");
    storage.rename(name, &aside)?;
    report.set_aside.insert(0, aside);
    Ok(())
}

/// A last segment with a header and no record (a crash right after it was created) holds
/// nothing: remove it, so that every segment in memory holds at least one record.
fn drop_trailing_empty<S: Storage>(storage: &S, segments: &mut VecDeque<Segment>) -> Result<bool, LogError> {
    let mut dropped = false;
    while let Some(segment) = segments.back().filter(|segment| segment.last.is_none()) {
        storage.remove(&segment.name)?;
        segments.pop_back();
        dropped = true;
    }
    Ok(dropped)
}

/// Validates one segment file: header, continuity with the previous segment, every record.
fn check_segment<S: Storage>(
    storage: &S,
    options: &LogOptions,
    name: &str,
    first: u64,
    expected: Option<u64>,
    is_last: bool,
) -> Result<Checked, LogError> {
    let file_len = storage.len(name)?;
    let corrupt = |offset: u64, reason: String| Damage::Corrupt { segment: name.to_string(), offset, reason };
    let torn = |offset: u64| Damage::TornTail { segment: name.to_string(), offset };
    let header_len = SEGMENT_HEADER_LEN as u64;
    let no_segment = |damage| Ok(Checked { segment: None, file_len, damage: Some(damage) });
    if file_len < header_len {
        if is_last {
            return no_segment(torn(0));
        }
        let reason = format!("file of {file_len} bytes is shorter than its {header_len}-byte header");
        return no_segment(corrupt(0, reason));
    }
    let mut header = [0u8; SEGMENT_HEADER_LEN];
    storage.read_at(name, 0, &mut header)?;
    match format::decode_segment_header(&header) {
        Err(_) if is_last && segment::zeros_to_end(storage, name, 0, file_len)? => {
            return no_segment(torn(0));
        }
        Err(invalid) => return no_segment(corrupt(0, format!("segment header: {invalid}"))),
        Ok(named) if named != first => {
            let reason = format!("header names first index {named}, the file name {first}");
            return no_segment(corrupt(0, reason));
        }
        Ok(_) => {}
    }
    if let Some(expected) = expected.filter(|&expected| expected != first) {
        let reason = format!("index gap: segment starts at {first}, {expected} expected");
        return no_segment(corrupt(0, reason));
    }
    let mut segment = Segment::new(&options.name, first);
    let damage = scan_records(storage, &mut segment, file_len, is_last)?;
    Ok(Checked { segment: Some(segment), file_len, damage })
}

/// Reads every record of a segment whose header checked, noting the valid ones in
/// `segment`, and returns the first problem.
fn scan_records<S: Storage>(
    storage: &S,
    segment: &mut Segment,
    file_len: u64,
    is_last: bool,
) -> Result<Option<Damage>, LogError> {
    let name = segment.name.clone();
    let start = SEGMENT_HEADER_LEN as u64;
    let mut scanner = Scanner::new(storage, &name, start, file_len, segment::SCAN_CHUNK);
    let corrupt = |offset: u64, reason: String| Some(Damage::Corrupt { segment: name.clone(), offset, reason });
    loop {
        let offset = scanner.offset();
        assert_eq!(offset, segment.bytes, "the valid part ends where the scan is");
        let header = match scanner.next()? {
            Step::End => return Ok(None),
            Step::Torn if is_last => return Ok(Some(Damage::TornTail { segment: name.clone(), offset })),
            Step::Torn => return Ok(corrupt(offset, "incomplete record at the end of a sealed segment".into())),
            Step::Invalid(_) if is_last && segment::zeros_to_end(storage, &name, offset, file_len)? => {
                return Ok(Some(Damage::TornTail { segment: name.clone(), offset }))
            }
            Step::Invalid(invalid) => return Ok(corrupt(offset, format!("record header: {invalid}"))),
            Step::Record(header) => header,
        };
        let expected = segment.next_index();
        if header.index != expected {
            let reason = format!("record index {} where {expected} expected", header.index);
            return Ok(corrupt(offset, reason));
        }
        if let Err(invalid) = scanner.payload(&header)? {
            return Ok(corrupt(offset, format!("record {expected}: {invalid}")));
        }
        segment.push_record(header.index, header.record_len());
        scanner.advance(&header);
    }
}

#[cfg(test)]
#[path = "recovery_tests.rs"]
mod tests;
