//! Byte layouts of everything this crate writes: record headers, segment file headers and
//! blob frames. Pure functions over byte slices, no I/O, so every layout can be tested (and
//! fuzzed) on its own.
//!
//! All integers are little-endian. Every byte that is ever read back is covered by a CRC-32
//! (IEEE, `crc32fast`): a single flipped byte, or any burst of up to 32 flipped bits, is always
//! detected. Decoders take untrusted bytes and answer [`Invalid`], never panic.
//!
//! The record header has its own checksum besides the one over header and payload, so that
//! a damaged length field is caught before it is trusted (it would otherwise decide how much
//! to read, and whether a bad record looks like a torn tail or like corruption).

use std::fmt;

/// First bytes of every record header.
pub const RECORD_MAGIC: [u8; 4] = *b"TGRC";
/// First bytes of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"TANDMSEG";
/// First bytes of every blob file.
pub const BLOB_MAGIC: [u8; 8] = *b"TANDBLOB";
/// Version of all three layouts. A reader refuses any other value instead of guessing.
pub const FORMAT_VERSION: u16 = 1;

/// Bytes of a record header; the payload follows it directly.
pub const RECORD_HEADER_LEN: usize = 28;
/// Bytes of the header at the start of every segment file.
pub const SEGMENT_HEADER_LEN: usize = 24;
/// Bytes of a blob frame before its payload.
pub const BLOB_HEADER_LEN: usize = 20;
/// Largest payload of a record or blob. Checked before anything is allocated, so a damaged
/// length can never make a reader allocate more than this.
pub const MAX_PAYLOAD: usize = 1 << 30;

// The header fields below sit at fixed offsets; these pin the sizes the offsets add up to.
const _: () = assert!(RECORD_HEADER_LEN == 4 + 2 + 2 + 8 + 4 + 4 + 4);
const _: () = assert!(SEGMENT_HEADER_LEN == 8 + 8 + 4 + 4);
const _: () = assert!(BLOB_HEADER_LEN == 8 + 4 + 4 + 4);
// A payload length must fit the u32 length fields.
const _: () = assert!(MAX_PAYLOAD <= u32::MAX as usize);

/// Why bytes were rejected. Carried into error messages next to the file name and offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invalid {
    /// The bytes do not start with the expected magic: not ours, or overwritten.
    Magic,
    /// A layout version this build does not know.
    Version(u32),
    /// Reserved flag bits set; a version 1 writer always writes zero.
    Flags(u16),
    /// The header's own checksum does not match: its length or index cannot be trusted.
    HeaderChecksum,
    /// The declared payload length is above [`MAX_PAYLOAD`].
    TooLarge(u64),
    /// The checksum over header and payload does not match: the payload was altered.
    PayloadChecksum,
    /// Fewer bytes than the layout needs.
    Short {
        /// Bytes the layout needs.
        needed: u64,
        /// Bytes there were.
        got: u64,
    },
    /// A blob file longer or shorter than its frame says.
    LengthMismatch {
        /// Payload bytes the frame's length field declares.
        declared: u64,
        /// Payload bytes the file holds.
        actual: u64,
    },
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::Magic => write!(f, "bad magic"),
            Invalid::Version(v) => write!(f, "unknown format version {v}"),
            Invalid::Flags(flags) => write!(f, "reserved flags set ({flags:#06x})"),
            Invalid::HeaderChecksum => write!(f, "header checksum mismatch"),
            Invalid::TooLarge(len) => {
                write!(f, "payload length {len} above the maximum {MAX_PAYLOAD}")
            }
            Invalid::PayloadChecksum => write!(f, "payload checksum mismatch"),
            Invalid::Short { needed, got } => write!(f, "short: needs {needed} bytes, got {got}"),
            Invalid::LengthMismatch { declared, actual } => {
                write!(f, "frame declares {declared} payload bytes, file holds {actual}")
            }
        }
    }
}

/// A record header that passed its own checksum: its index and length can be trusted, its
/// payload not yet (see [`RecordHeader::verify_payload`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// The record's index in the log.
    pub index: u64,
    /// Payload bytes after the header.
    pub len: u32,
    data_crc: u32,
}

impl RecordHeader {
    /// Header plus payload bytes.
    pub fn record_len(&self) -> u64 {
        RECORD_HEADER_LEN as u64 + u64::from(self.len)
    }

    /// Checks `payload` against the checksum over header fields and payload.
    pub fn verify_payload(&self, payload: &[u8]) -> Result<(), Invalid> {
        if payload.len() != self.len as usize {
            return Err(Invalid::Short { needed: u64::from(self.len), got: payload.len() as u64 });
        }
        let prefix = record_prefix(self.index, self.len);
        if data_crc(&prefix, payload) != self.data_crc {
            return Err(Invalid::PayloadChecksum);
        }
        Ok(())
    }
}

/// Bytes 0..20 of a record header: everything the two checksums are computed over.
fn record_prefix(index: u64, len: u32) -> [u8; 20] {
    let mut prefix = [0u8; 20];
    prefix[0..4].copy_from_slice(&RECORD_MAGIC);
    prefix[4..6].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    // 6..8: flags, zero in version 1.
    prefix[8..16].copy_from_slice(&index.to_le_bytes());
    prefix[16..20].copy_from_slice(&len.to_le_bytes());
    prefix
}

fn data_crc(prefix: &[u8; 20], payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(prefix);
    hasher.update(payload);
    hasher.finalize()
}

/// Appends one framed record to `out`.
///
/// # Panics
///
/// If the payload is above [`MAX_PAYLOAD`]: callers check first (the log answers
/// `LogError::TooLarge`), so this is a bug, not bad input.
pub fn encode_record(out: &mut Vec<u8>, index: u64, payload: &[u8]) {
    assert!(payload.len() <= MAX_PAYLOAD, "caller checks the payload size");
    let len = payload.len() as u32;
    let prefix = record_prefix(index, len);
    let start = out.len();
    out.extend_from_slice(&prefix);
    out.extend_from_slice(&data_crc(&prefix, payload).to_le_bytes());
    let head_crc = crc32fast::hash(&out[start..start + 24]);
    out.extend_from_slice(&head_crc.to_le_bytes());
    out.extend_from_slice(payload);
    assert_eq!(out.len() - start, RECORD_HEADER_LEN + payload.len());
}

/// Decodes and checks the first [`RECORD_HEADER_LEN`] bytes of `bytes`.
pub fn decode_record_header(bytes: &[u8]) -> Result<RecordHeader, Invalid> {
    let header = bytes
        .get(..RECORD_HEADER_LEN)
        .ok_or(Invalid::Short { needed: RECORD_HEADER_LEN as u64, got: bytes.len() as u64 })?;
    if header[0..4] != RECORD_MAGIC {
        return Err(Invalid::Magic);
    }
    // The checksum is checked before version and flags: a version or flag field that fails
    // its checksum is damage, not a format from the future.
    if crc32fast::hash(&header[0..24]) != le_u32(&header[24..28]) {
        return Err(Invalid::HeaderChecksum);
    }
    let version = le_u16(&header[4..6]);
    if version != FORMAT_VERSION {
        return Err(Invalid::Version(u32::from(version)));
    }
    let flags = le_u16(&header[6..8]);
    if flags != 0 {
        return Err(Invalid::Flags(flags));
    }
    let len = le_u32(&header[16..20]);
    if len as usize > MAX_PAYLOAD {
        return Err(Invalid::TooLarge(u64::from(len)));
    }
    Ok(RecordHeader { index: le_u64(&header[8..16]), len, data_crc: le_u32(&header[20..24]) })
}

/// The header that starts every segment file. Naming the first index inside the file (as
/// well as in its name) catches a file renamed or copied into the wrong place.
pub fn encode_segment_header(first: u64) -> [u8; SEGMENT_HEADER_LEN] {
    let mut header = [0u8; SEGMENT_HEADER_LEN];
    header[0..8].copy_from_slice(&SEGMENT_MAGIC);
    header[8..16].copy_from_slice(&first.to_le_bytes());
    header[16..20].copy_from_slice(&u32::from(FORMAT_VERSION).to_le_bytes());
    let crc = crc32fast::hash(&header[0..20]);
    header[20..24].copy_from_slice(&crc.to_le_bytes());
    header
}

/// Checks a segment file header and returns the first index it names.
pub fn decode_segment_header(bytes: &[u8]) -> Result<u64, Invalid> {
    let header = bytes
        .get(..SEGMENT_HEADER_LEN)
        .ok_or(Invalid::Short { needed: SEGMENT_HEADER_LEN as u64, got: bytes.len() as u64 })?;
    if header[0..8] != SEGMENT_MAGIC {
        return Err(Invalid::Magic);
    }
    if crc32fast::hash(&header[0..20]) != le_u32(&header[20..24]) {
        return Err(Invalid::HeaderChecksum);
    }
    let version = le_u32(&header[16..20]);
    if version != u32::from(FORMAT_VERSION) {
        return Err(Invalid::Version(version));
    }
    Ok(le_u64(&header[8..16]))
}

/// A whole blob file: frame header then payload, one checksum over both.
///
/// # Panics
///
/// If the payload is above [`MAX_PAYLOAD`] (callers check first, as for records).
pub fn encode_blob(payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() <= MAX_PAYLOAD, "caller checks the payload size");
    let mut out = Vec::with_capacity(BLOB_HEADER_LEN + payload.len());
    out.extend_from_slice(&BLOB_MAGIC);
    out.extend_from_slice(&u32::from(FORMAT_VERSION).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&out);
    hasher.update(payload);
    out.extend_from_slice(&hasher.finalize().to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Checks a whole blob file and returns its payload.
pub fn decode_blob(file: &[u8]) -> Result<&[u8], Invalid> {
    if file.len() < BLOB_HEADER_LEN {
        return Err(Invalid::Short { needed: BLOB_HEADER_LEN as u64, got: file.len() as u64 });
    }
    let (header, payload) = file.split_at(BLOB_HEADER_LEN);
    if header[0..8] != BLOB_MAGIC {
        return Err(Invalid::Magic);
    }
    let declared = u64::from(le_u32(&header[12..16]));
    if declared != payload.len() as u64 {
        return Err(Invalid::LengthMismatch { declared, actual: payload.len() as u64 });
    }
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&header[0..16]);
    hasher.update(payload);
    if hasher.finalize() != le_u32(&header[16..20]) {
        return Err(Invalid::PayloadChecksum);
    }
    let version = le_u32(&header[8..12]);
    if version != u32::from(FORMAT_VERSION) {
        return Err(Invalid::Version(version));
    }
    Ok(payload)
}

fn le_u16(bytes: &[u8]) -> u16 {
    let mut array = [0u8; 2];
    array.copy_from_slice(bytes);
    u16::from_le_bytes(array)
}

fn le_u32(bytes: &[u8]) -> u32 {
    let mut array = [0u8; 4];
    array.copy_from_slice(bytes);
    u32::from_le_bytes(array)
}

fn le_u64(bytes: &[u8]) -> u64 {
    let mut array = [0u8; 8];
    array.copy_from_slice(bytes);
    u64::from_le_bytes(array)
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
