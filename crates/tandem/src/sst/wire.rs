//! The byte format between a `tandem` SST donor and its joiner.
//!
//! The donor opens every connection. Each starts with a [`Hello`] that names
//! the transfer (the joiner's token, so a stray or stale donor is refused),
//! what it carries (a bypass marker or one data stream of several) and the
//! protocol version, which a joiner of another version refuses by name.
//! The joiner answers with one [`Reply`].
//!
//! Then come [`Frame`]s. A data stream sends whole files, each as a `File`
//! header, `Chunk`s in order and an `EndOfFile`. Every chunk carries a CRC-32
//! of its bytes, so a corrupted byte is a refused transfer, never a wrong
//! page in the joiner's tablespace. A stream ends with `End`, which repeats
//! how many files and bytes it sent; the joiner checks that against what it
//! wrote before it acknowledges.
//!
//! Version 2 adds compressed chunks (`[sst] compression`): the CRC-32 is of
//! the bytes before compression, so it also checks the decompression. A
//! donor that does not compress says version 1, which joiners of either
//! version accept.

use std::io::{self, Read, Write};

pub const MAGIC: [u8; 8] = *b"TNDMSST\0";
/// Bumped on any change to the frames below.
pub const VERSION: u16 = 2;
/// The oldest version a joiner still reads: 1 is 2 without compression.
pub const OLDEST_VERSION: u16 = 1;
/// The largest chunk a donor sends, and a joiner accepts.
pub const MAX_CHUNK: usize = 1 << 20;
/// Paths and positions are short; anything longer is a broken peer.
const MAX_TEXT: usize = 4096;

/// What a connection carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// IST only: the joiner keeps its data; one `Position` and `End` follow.
    Bypass,
    /// One of `streams` data connections of a full transfer.
    Data { stream: u16, streams: u16 },
}

/// The first bytes of every connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub version: u16,
    pub token: String,
    pub kind: Kind,
}

/// The joiner's answer to a `Hello` or an `End`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Ok,
    Refused(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// The position the data is at (`uuid:seqno domain`), and, on stream 0
    /// of a full transfer, the totals of all streams (for progress).
    Position {
        gtid: String,
        files: u64,
        bytes: u64,
    },
    /// A directory to create (an empty database must exist on the joiner).
    Dir {
        path: String,
        mode: u32,
    },
    File {
        path: String,
        mode: u32,
        size: u64,
    },
    Chunk {
        offset: u64,
        data: Vec<u8>,
    },
    EndOfFile,
    End {
        files: u64,
        bytes: u64,
    },
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

impl Hello {
    pub fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        let mut b = Vec::with_capacity(64);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&self.version.to_le_bytes());
        put_text(&mut b, &self.token);
        match self.kind {
            Kind::Bypass => b.push(1),
            Kind::Data { stream, streams } => {
                b.push(2);
                b.extend_from_slice(&stream.to_le_bytes());
                b.extend_from_slice(&streams.to_le_bytes());
            }
        }
        w.write_all(&b)
    }

    /// Reads a hello. A peer that is not a `tandem` SST donor (wrong magic)
    /// and one of another version get errors that say so.
    pub fn read_from(r: &mut impl Read) -> io::Result<Hello> {
        let mut magic = [0u8; 8];
        r.read_exact(&mut magic)?;
        if magic != MAGIC {
            return Err(invalid("the peer does not speak the tandem SST protocol"));
        }
        let version = read_u16(r)?;
        if !(OLDEST_VERSION..=VERSION).contains(&version) {
            return Err(invalid(format!(
                "the donor speaks tandem SST protocol version {version}, this joiner versions {OLDEST_VERSION} to {VERSION}"
            )));
        }
        let token = read_text(r)?;
        let kind = match read_u8(r)? {
            1 => Kind::Bypass,
            2 => {
                let stream = read_u16(r)?;
                let streams = read_u16(r)?;
                if streams == 0 || stream >= streams {
                    return Err(invalid(format!("stream {stream} of {streams}")));
                }
                Kind::Data { stream, streams }
            }
            k => return Err(invalid(format!("unknown connection kind {k}"))),
        };
        Ok(Hello { version, token, kind })
    }
}

impl Reply {
    pub fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        let mut b = Vec::new();
        match self {
            Reply::Ok => b.push(0),
            Reply::Refused(why) => {
                b.push(1);
                put_text(&mut b, why);
            }
        }
        w.write_all(&b)?;
        w.flush()
    }

    pub fn read_from(r: &mut impl Read) -> io::Result<Reply> {
        match read_u8(r)? {
            0 => Ok(Reply::Ok),
            1 => Ok(Reply::Refused(read_text(r)?)),
            k => Err(invalid(format!("unknown reply {k}"))),
        }
    }
}

impl Frame {
    /// Writes the frame. A chunk's bytes go straight from `data` to the
    /// writer: no copy of the payload.
    pub fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        let mut b = Vec::with_capacity(64);
        match self {
            Frame::Position { gtid, files, bytes } => {
                b.push(b'P');
                put_text(&mut b, gtid);
                b.extend_from_slice(&files.to_le_bytes());
                b.extend_from_slice(&bytes.to_le_bytes());
            }
            Frame::Dir { path, mode } => {
                b.push(b'D');
                put_text(&mut b, path);
                b.extend_from_slice(&mode.to_le_bytes());
            }
            Frame::File { path, mode, size } => {
                b.push(b'F');
                put_text(&mut b, path);
                b.extend_from_slice(&mode.to_le_bytes());
                b.extend_from_slice(&size.to_le_bytes());
            }
            Frame::Chunk { offset, data } => return write_chunk(w, *offset, data),
            Frame::EndOfFile => b.push(b'e'),
            Frame::End { files, bytes } => {
                b.push(b'Z');
                b.extend_from_slice(&files.to_le_bytes());
                b.extend_from_slice(&bytes.to_le_bytes());
            }
        }
        w.write_all(&b)
    }

    /// Reads one frame; a chunk whose checksum does not match its bytes is
    /// an error, as is a chunk over [`MAX_CHUNK`] or an unknown frame. A
    /// compressed chunk comes back as the `Chunk` it was.
    pub fn read_from(r: &mut impl Read) -> io::Result<Frame> {
        Ok(match read_u8(r)? {
            b'P' => Frame::Position { gtid: read_text(r)?, files: read_u64(r)?, bytes: read_u64(r)? },
            b'D' => Frame::Dir { path: read_text(r)?, mode: read_u32(r)? },
            b'F' => Frame::File { path: read_text(r)?, mode: read_u32(r)?, size: read_u64(r)? },
            b'C' => {
                let offset = read_u64(r)?;
                let len = read_u32(r)? as usize;
                let crc = read_u32(r)?;
                if len == 0 || len > MAX_CHUNK {
                    return Err(invalid(format!("a chunk of {len} bytes")));
                }
                let mut data = vec![0u8; len];
                r.read_exact(&mut data)?;
                if crc32fast::hash(&data) != crc {
                    return Err(invalid(format!("checksum mismatch in the chunk at offset {offset}")));
                }
                Frame::Chunk { offset, data }
            }
            b'z' => read_compressed_chunk(r)?,
            b'e' => Frame::EndOfFile,
            b'Z' => Frame::End { files: read_u64(r)?, bytes: read_u64(r)? },
            k => return Err(invalid(format!("unknown frame type {k:#04x}"))),
        })
    }
}

/// A chunk from a borrowed buffer (the donor's read buffer).
pub fn write_chunk(w: &mut impl Write, offset: u64, data: &[u8]) -> io::Result<()> {
    assert!(!data.is_empty() && data.len() <= MAX_CHUNK, "chunk of {} bytes", data.len());
    let mut b = [0u8; 17];
    b[0] = b'C';
    b[1..9].copy_from_slice(&offset.to_le_bytes());
    b[9..13].copy_from_slice(&(data.len() as u32).to_le_bytes());
    b[13..17].copy_from_slice(&crc32fast::hash(data).to_le_bytes());
    w.write_all(&b)?;
    w.write_all(data)
}

/// How a donor compresses its chunks (`[sst] compression`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Fast enough to pay on links slower than about a gigabyte a second.
    Lz4,
    /// Smaller than lz4, slower; for slow links. Levels 1 to 19.
    Zstd { level: i32 },
}

impl Compression {
    fn code(self) -> u8 {
        match self {
            Compression::Lz4 => 1,
            Compression::Zstd { .. } => 2,
        }
    }

    pub fn name(self) -> String {
        match self {
            Compression::Lz4 => "lz4".into(),
            Compression::Zstd { level } => format!("zstd level {level}"),
        }
    }
}

/// Compresses a chunk's bytes into `packed`; false when that does not make
/// them smaller (compressed or encrypted tablespaces, random data), and the
/// chunk should go plain: the joiner takes either.
pub fn compress(data: &[u8], how: Compression, packed: &mut Vec<u8>) -> io::Result<bool> {
    packed.clear();
    match how {
        Compression::Lz4 => {
            packed.resize(lz4_flex::block::get_maximum_output_size(data.len()), 0);
            let n = lz4_flex::block::compress_into(data, packed).map_err(|e| io::Error::other(e.to_string()))?;
            packed.truncate(n);
        }
        Compression::Zstd { level } => {
            packed.resize(zstd::zstd_safe::compress_bound(data.len()), 0);
            let n = zstd::bulk::compress_to_buffer(data, packed, level)?;
            packed.truncate(n);
        }
    }
    Ok(packed.len() < data.len())
}

/// A chunk whose bytes `data` [`compress`] packed into `packed`.
pub fn write_compressed_chunk(
    w: &mut impl Write,
    offset: u64,
    data: &[u8],
    how: Compression,
    packed: &[u8],
) -> io::Result<()> {
    assert!(!data.is_empty() && data.len() <= MAX_CHUNK, "chunk of {} bytes", data.len());
    assert!(!packed.is_empty() && packed.len() < data.len(), "{} bytes packed for {}", packed.len(), data.len());
    let mut b = [0u8; 22];
    b[0] = b'z';
    b[1..9].copy_from_slice(&offset.to_le_bytes());
    b[9..13].copy_from_slice(&(data.len() as u32).to_le_bytes());
    b[13..17].copy_from_slice(&crc32fast::hash(data).to_le_bytes());
    b[17] = how.code();
    b[18..22].copy_from_slice(&(packed.len() as u32).to_le_bytes());
    w.write_all(&b)?;
    w.write_all(packed)
}

/// A chunk compressed where that pays, plain otherwise. Returns the bytes
/// its payload took on the wire.
pub fn write_chunk_compressed(
    w: &mut impl Write,
    offset: u64,
    data: &[u8],
    how: Compression,
    scratch: &mut Vec<u8>,
) -> io::Result<usize> {
    if compress(data, how, scratch)? {
        write_compressed_chunk(w, offset, data, how, scratch)?;
        Ok(scratch.len())
    } else {
        write_chunk(w, offset, data)?;
        Ok(data.len())
    }
}

/// The rest of a `z` frame. Sizes are checked before anything is
/// allocated, the decompressed size must be the announced one, and the
/// checksum is of the decompressed bytes.
fn read_compressed_chunk(r: &mut impl Read) -> io::Result<Frame> {
    let offset = read_u64(r)?;
    let len = read_u32(r)? as usize;
    let crc = read_u32(r)?;
    let code = read_u8(r)?;
    let packed_len = read_u32(r)? as usize;
    if len == 0 || len > MAX_CHUNK || packed_len == 0 || packed_len >= len {
        return Err(invalid(format!("a compressed chunk of {packed_len} bytes for {len}")));
    }
    let mut packed = vec![0u8; packed_len];
    r.read_exact(&mut packed)?;
    let broken = |e: String| invalid(format!("the compressed chunk at offset {offset} does not decompress: {e}"));
    let data = match code {
        1 => {
            let mut out = vec![0u8; len];
            let n = lz4_flex::block::decompress_into(&packed, &mut out).map_err(|e| broken(e.to_string()))?;
            out.truncate(n);
            out
        }
        2 => zstd::bulk::decompress(&packed, len).map_err(|e| broken(e.to_string()))?,
        c => return Err(invalid(format!("unknown compression {c}"))),
    };
    if data.len() != len {
        return Err(broken(format!("{} bytes, {len} announced", data.len())));
    }
    if crc32fast::hash(&data) != crc {
        return Err(invalid(format!("checksum mismatch in the chunk at offset {offset}")));
    }
    Ok(Frame::Chunk { offset, data })
}

fn put_text(b: &mut Vec<u8>, text: &str) {
    assert!(text.len() <= MAX_TEXT, "text of {} bytes", text.len());
    b.extend_from_slice(&(text.len() as u16).to_le_bytes());
    b.extend_from_slice(text.as_bytes());
}

fn read_text(r: &mut impl Read) -> io::Result<String> {
    let len = read_u16(r)? as usize;
    if len > MAX_TEXT {
        return Err(invalid(format!("a text of {len} bytes")));
    }
    let mut b = vec![0u8; len];
    r.read_exact(&mut b)?;
    String::from_utf8(b).map_err(|_| invalid("a text that is not UTF-8"))
}

fn read_u8(r: &mut impl Read) -> io::Result<u8> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b)?;
    Ok(b[0])
}

fn read_u16(r: &mut impl Read) -> io::Result<u16> {
    let mut b = [0u8; 2];
    r.read_exact(&mut b)?;
    Ok(u16::from_le_bytes(b))
}

fn read_u32(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames() -> Vec<Frame> {
        vec![
            Frame::Position { gtid: "f149d744-e5fa-11f1-a3c6-2acd1d88e0b9:2405 0".into(), files: 3, bytes: 70000 },
            Frame::Dir { path: "test".into(), mode: 0o700 },
            Frame::File { path: "sbtest/sbtest1.ibd".into(), mode: 0o660, size: 70000 },
            Frame::Chunk { offset: 0, data: (0..65536u32).map(|i| (i * 7) as u8).collect() },
            Frame::Chunk { offset: 65536, data: vec![9; 4464] },
            Frame::EndOfFile,
            Frame::End { files: 1, bytes: 70000 },
        ]
    }

    fn encode(frames: &[Frame]) -> Vec<u8> {
        let mut b = Vec::new();
        for f in frames {
            f.write_to(&mut b).unwrap();
        }
        b
    }

    #[test]
    fn frames_read_back_as_written() {
        let bytes = encode(&frames());
        let mut r = &bytes[..];
        let back: Vec<Frame> = (0..frames().len()).map(|_| Frame::read_from(&mut r).unwrap()).collect();
        assert_eq!(back, frames());
        assert!(r.is_empty());
    }

    #[test]
    fn hello_and_reply_read_back() {
        for kind in [Kind::Bypass, Kind::Data { stream: 1, streams: 4 }] {
            let hello = Hello { version: VERSION, token: "0123abcd".into(), kind };
            let mut b = Vec::new();
            hello.write_to(&mut b).unwrap();
            assert_eq!(Hello::read_from(&mut &b[..]).unwrap(), hello);
        }
        for reply in [Reply::Ok, Reply::Refused("wrong token".into())] {
            let mut b = Vec::new();
            reply.write_to(&mut b).unwrap();
            assert_eq!(Reply::read_from(&mut &b[..]).unwrap(), reply);
        }
    }

    #[test]
    fn another_protocol_or_version_is_refused_by_name() {
        let err = Hello::read_from(&mut &b"GET / HTTP/1.1\r\n\r\n"[..]).unwrap_err();
        assert!(err.to_string().contains("does not speak the tandem SST protocol"), "{err}");
        let mut b = Vec::new();
        Hello { version: VERSION + 1, token: "t".into(), kind: Kind::Bypass }.write_to(&mut b).unwrap();
        let err = Hello::read_from(&mut &b[..]).unwrap_err();
        assert!(err.to_string().contains(&format!("version {}", VERSION + 1)), "{err}");
        for version in OLDEST_VERSION..=VERSION {
            let mut b = Vec::new();
            Hello { version, token: "t".into(), kind: Kind::Bypass }.write_to(&mut b).unwrap();
            assert_eq!(Hello::read_from(&mut &b[..]).unwrap().version, version);
        }
        let mut b = Vec::new();
        Hello { version: VERSION, token: "t".into(), kind: Kind::Data { stream: 2, streams: 2 } }
            .write_to(&mut b)
            .unwrap();
        assert!(Hello::read_from(&mut &b[..]).is_err(), "stream 2 of 2 does not exist");
    }

    /// Every single flipped bit in a chunk's header or payload is caught:
    /// the frame is refused or reads back as something other than a chunk
    /// with the same bytes at the same offset.
    #[test]
    fn a_flipped_bit_in_a_chunk_is_never_taken_for_the_original() {
        let chunk = Frame::Chunk { offset: 4096, data: (0..300u32).map(|i| (i * 31) as u8).collect() };
        let bytes = encode(std::slice::from_ref(&chunk));
        let mut caught = 0;
        for bit in 0..bytes.len() * 8 {
            let mut b = bytes.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            match Frame::read_from(&mut &b[..]) {
                Ok(f) => assert_ne!(f, chunk, "bit {bit} flipped went unnoticed"),
                Err(_) => caught += 1,
            }
        }
        // Only a flip in the offset field can still read as a valid chunk
        // (at another offset, which the joiner checks against the file).
        assert!(caught >= bytes.len() * 8 - 64, "{caught} of {} caught", bytes.len() * 8);
    }

    fn compressible() -> Vec<u8> {
        (0..200_000u32).map(|i| if i % 4096 < 3000 { 0 } else { (i * 13 % 251) as u8 }).collect()
    }

    const BOTH: [Compression; 2] = [Compression::Lz4, Compression::Zstd { level: 1 }];

    #[test]
    fn compressed_chunks_read_back_as_the_chunk() {
        for how in BOTH {
            let data = compressible();
            let mut b = Vec::new();
            let wire = write_chunk_compressed(&mut b, 8192, &data, how, &mut Vec::new()).unwrap();
            assert!(wire < data.len() / 2, "{how:?}: {wire} bytes for {}", data.len());
            assert_eq!(b[0], b'z');
            assert_eq!(Frame::read_from(&mut &b[..]).unwrap(), Frame::Chunk { offset: 8192, data });
        }
    }

    #[test]
    fn incompressible_chunks_go_plain() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let noise: Vec<u8> = (0..65536)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for how in BOTH {
            let mut b = Vec::new();
            assert_eq!(write_chunk_compressed(&mut b, 0, &noise, how, &mut Vec::new()).unwrap(), noise.len());
            assert_eq!(b[0], b'C', "{how:?}");
            assert_eq!(Frame::read_from(&mut &b[..]).unwrap(), Frame::Chunk { offset: 0, data: noise.clone() });
        }
    }

    /// A flipped bit anywhere in a compressed chunk (header, compressed
    /// bytes) is refused, or reads as another offset, or decodes to the
    /// very same bytes (a flip lz4 or zstd does not depend on): never as
    /// wrong bytes at the chunk's place. And every truncation is an error.
    #[test]
    fn a_damaged_compressed_chunk_never_gives_wrong_bytes() {
        for how in BOTH {
            let data: Vec<u8> = compressible()[..3000].to_vec();
            let mut bytes = Vec::new();
            write_chunk_compressed(&mut bytes, 4096, &data, how, &mut Vec::new()).unwrap();
            let mut caught = 0;
            for bit in 0..bytes.len() * 8 {
                let mut b = bytes.clone();
                b[bit / 8] ^= 1 << (bit % 8);
                match Frame::read_from(&mut &b[..]) {
                    Ok(Frame::Chunk { offset: 4096, data: got }) => assert!(got == data, "{how:?}: bit {bit}"),
                    Ok(_) => {}
                    Err(_) => caught += 1,
                }
            }
            // The 64 offset bits read as other offsets; a handful of flips in
            // the compressed bytes decode to the same data.
            assert!(caught + 64 + 16 >= bytes.len() * 8, "{how:?}: {caught} of {} caught", bytes.len() * 8);
            for cut in 0..bytes.len() {
                assert!(Frame::read_from(&mut &bytes[..cut]).is_err(), "{how:?}: cut at {cut} read");
            }
        }
    }

    #[test]
    fn compressed_chunks_with_impossible_sizes_are_refused_before_allocating() {
        let frame = |len: u32, packed: u32, code: u8| {
            let mut b = vec![b'z'];
            b.extend_from_slice(&0u64.to_le_bytes());
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
            b.push(code);
            b.extend_from_slice(&packed.to_le_bytes());
            b
        };
        for (len, packed) in [((MAX_CHUNK + 1) as u32, 10), (100, 100), (100, 0), (0, 0), (100, u32::MAX)] {
            let err = Frame::read_from(&mut &frame(len, packed, 1)[..]).unwrap_err().to_string();
            assert!(err.contains("compressed chunk of"), "{len}/{packed}: {err}");
        }
        let mut b = frame(100, 4, 9);
        b.extend_from_slice(&[0; 4]);
        assert!(Frame::read_from(&mut &b[..]).unwrap_err().to_string().contains("unknown compression 9"));
    }

    #[test]
    fn every_truncation_is_an_error_not_a_frame() {
        let bytes = encode(&frames()[2..4]);
        let first = encode(&frames()[2..3]).len();
        for cut in 0..bytes.len() {
            let mut r = &bytes[..cut];
            let mut read = 0;
            while let Ok(_f) = Frame::read_from(&mut r) {
                read += 1;
            }
            assert!(read < 2, "a stream cut at {cut} of {} gave both frames", bytes.len());
            assert_eq!(read == 1, cut >= first, "cut at {cut}");
        }
    }

    #[test]
    fn oversized_chunks_and_texts_are_refused() {
        let mut b = vec![b'C'];
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&((MAX_CHUNK + 1) as u32).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        assert!(Frame::read_from(&mut &b[..]).unwrap_err().to_string().contains("chunk of"));
        let mut b = vec![b'D'];
        b.extend_from_slice(&u16::MAX.to_le_bytes());
        assert!(Frame::read_from(&mut &b[..]).unwrap_err().to_string().contains("text of"));
        assert!(Frame::read_from(&mut &[b'x'][..]).unwrap_err().to_string().contains("unknown frame"));
    }
}
