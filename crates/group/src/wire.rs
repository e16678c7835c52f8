//! Wire format of the group transport.
//!
//! ```text
//!   dialer   ──► MAGIC "TNDM" · version u32 BE · frame(Hello)
//!   listener ──► MAGIC "TNDM" · version u32 BE · frame(HelloReply)
//!   then, one at a time:  frame(Request) ──► frame(Response)
//!   frame = u32 BE length · that many bytes of bincode (1.3, fixint, little endian)
//! ```
//!
//! Everything read here comes from the network: every failure is a value,
//! never a panic, and sizes are checked before anything is allocated.

use std::fmt;
use std::io;

use bincode::Options;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub use crate::raft::types::{AppPayload, Bytes};
use crate::raft::types::{GroupTypes, LogId, SnapshotMeta, Vote};
use crate::{MemberId, MemberInfo};

pub const MAGIC: [u8; 4] = *b"TNDM";
/// Bumped on any incompatible change of the messages below (2: durable
/// identities, log positions; 5: the accepting member's live group in
/// its hello reply; 6: the engine's messages carry lock epochs, which a
/// member of an earlier build would skip and so certify differently; 7:
/// the certification index is also purged at every progress report, which
/// an earlier build would not, and so certify differently; 8: a read index
/// request carries the asker's term; 9: forwarded payloads are answered
/// only when not taken, and handed back when the member no longer leads).
/// Requests added at the end since (`LogRange`, `ReadLog`) did not bump it:
/// a member of an earlier build cannot decode them, closes that connection
/// (logging it), and the asker counts it as holding nothing; every other
/// message is unchanged, so a rolling upgrade still works.
pub const PROTOCOL_VERSION: u32 = 9;
/// Hard cap on one frame; a peer announcing more is dropped. A snapshot
/// travels as one frame, and the engine's snapshot carries its
/// certification index, which a bulk load grows past 64 MiB: a smaller cap
/// left a joiner waiting forever for a snapshot that could never be sent.
/// A frame is read as its bytes arrive, so a length prefix alone never
/// makes us allocate that much.
pub const MAX_FRAME_BYTES: usize = 1 << 30;
/// Budget for the entries of one AppendEntries frame, leaving headroom for the
/// envelope so that a full batch never crosses [`MAX_FRAME_BYTES`].
pub const APPEND_BUDGET_BYTES: usize = 48 << 20;
/// Largest payload `submit` accepts: the largest write-set replicated in one
/// piece (Galera's `repl.max_ws_size` defaults to 2 GiB; a DBA loading a
/// 40 MiB row expects it to replicate). It must fit in a frame on its own,
/// and behind a forward batch that is just under half the append budget
/// (`submit::fill_batch`): see the assertion below.
pub const MAX_PAYLOAD_BYTES: usize = 512 << 20;

/// Room for a frame's envelope around its payloads (ids, lengths, a vote).
const ENVELOPE_BYTES: usize = 1 << 20;
const _: () = assert!(APPEND_BUDGET_BYTES / 2 + MAX_PAYLOAD_BYTES + ENVELOPE_BYTES <= MAX_FRAME_BYTES);

/// First message of a connection: who is calling, for which cluster.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Hello {
    pub cluster: String,
    pub member: MemberId,
    pub info: MemberInfo,
    /// The group uuid of the primary component the dialler is in, if any:
    /// two live groups that share a cluster name must not merge.
    pub group: Option<[u8; 16]>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum HelloReply {
    /// `group`: the group uuid of the primary component the accepting
    /// member is in, if any (see [`Hello::group`]).
    Accepted {
        member: MemberId,
        group: Option<[u8; 16]>,
    },
    Refused {
        reason: String,
    },
}

#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    AppendEntries(openraft::raft::AppendEntriesRequest<GroupTypes>),
    Vote(openraft::raft::VoteRequest<GroupTypes>),
    PreVote(openraft::raft::VoteRequest<GroupTypes>),
    Snapshot {
        vote: Vote,
        meta: SnapshotMeta,
        #[serde(with = "byte_vec")]
        data: Vec<u8>,
    },
    TransferLeader(openraft::raft::TransferLeaderRequest<GroupTypes>),
    /// A new member asks to be added as a learner.
    Join {
        member: MemberId,
        info: MemberInfo,
    },
    /// Payloads submitted on a follower, for the leader to append in order.
    /// Answered only when not taken (`Returned`, `Failed`): a follower
    /// writes them one after another without waiting (see `forward`).
    Forward {
        payloads: Vec<AppPayload>,
    },
    Promote {
        member: MemberId,
    },
    Leave {
        member: MemberId,
    },
    /// How far is your log? (Asked before a forced bootstrap, which must
    /// not start from a less advanced member.)
    LogPosition,
    /// Keeps the connection open and the peer's liveness fresh (see `mesh`).
    Keepalive,
    /// The leader's read index, for a causal read on a follower (see `read`).
    /// `term`: the term of the asker's own vote when it asked, which lets the
    /// leader count the request as the asker's acknowledgement of its
    /// leadership (`read::asker_completes_quorum`).
    ReadIndex {
        term: u64,
    },
    /// `pc.weight`: a member asks the leader to record its new weight.
    SetWeight {
        member: MemberId,
        weight: u32,
    },
    /// Which committed entries do you hold? Asked by a restarting member
    /// that looks for a member to catch its log up from (`catch_up`).
    LogRange,
    /// Committed entries from index `from` on, about `max_bytes` of them
    /// (at least one), for a restarting member's catch-up (`catch_up`).
    ReadLog {
        from: u64,
        max_bytes: u64,
    },
}

impl Request {
    /// The bytes of data the request carries (snapshot, write-sets), which
    /// is most of its frame.
    pub fn data_bytes(&self) -> usize {
        let payloads = |ps: &mut dyn Iterator<Item = &AppPayload>| -> usize { ps.map(|p| p.bytes.0.len()).sum() };
        match self {
            Request::Snapshot { data, .. } => data.len(),
            Request::Forward { payloads: ps } => payloads(&mut ps.iter()),
            Request::AppendEntries(rpc) => payloads(&mut rpc.entries.iter().filter_map(|e| match &e.payload {
                openraft::EntryPayload::Normal(p) => Some(p),
                _ => None,
            })),
            _ => 0,
        }
    }

    /// What the request is, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Request::AppendEntries(_) => "an append",
            Request::Vote(_) => "a vote request",
            Request::PreVote(_) => "a pre-vote request",
            Request::Snapshot { .. } => "a snapshot",
            Request::TransferLeader(_) => "a leadership transfer",
            Request::Join { .. } => "a join request",
            Request::Forward { .. } => "forwarded payloads",
            Request::Promote { .. } => "a promotion request",
            Request::Leave { .. } => "a leave request",
            Request::LogPosition => "a log position request",
            Request::Keepalive => "a keepalive",
            Request::ReadIndex { .. } => "a read index request",
            Request::SetWeight { .. } => "a weight change",
            Request::LogRange => "a log range request",
            Request::ReadLog { .. } => "a log read",
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub enum Response {
    AppendEntries(openraft::raft::AppendEntriesResponse<GroupTypes>),
    Vote(openraft::raft::VoteResponse<GroupTypes>),
    Snapshot(openraft::raft::SnapshotResponse<GroupTypes>),
    TransferLeader(openraft::raft::TransferLeaderResponse<GroupTypes>),
    /// A group request (join, promote, leave, weight) was carried out.
    Done,
    /// Ask the leader instead; `leader_addr` when this member knows it.
    NotLeader {
        leader_addr: Option<String>,
    },
    Failed {
        reason: String,
    },
    LogPosition {
        last: Option<LogId>,
    },
    /// Apply up to this log index, then read (see `read`).
    ReadIndex {
        index: u64,
    },
    /// Forwarded payloads handed back by a member that no longer leads,
    /// none of them appended: the follower sends them to the next leader.
    Returned {
        payloads: Vec<AppPayload>,
    },
    /// What a member's log holds: from index `first` (none: empty) up to
    /// `committed`, as far as it knows what is committed; `name`: its node
    /// name (`wsrep_node_name`); `leads`: it is the leader.
    LogRange {
        name: String,
        first: Option<u64>,
        committed: Option<LogId>,
        leads: bool,
    },
    /// Committed entries, encoded as the store writes them
    /// (`store::encode_entry`), in index order from the one asked for; and
    /// how far the member knows the log committed.
    Entries {
        #[serde(with = "byte_vecs")]
        entries: Vec<Vec<u8>>,
        committed: Option<LogId>,
    },
}

#[derive(Debug)]
pub enum WireError {
    /// The peer closed the connection between frames.
    Closed,
    Io(io::Error),
    TooLarge(usize),
    Malformed(String),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Closed => write!(f, "connection closed"),
            WireError::Io(e) => write!(f, "i/o error: {e}"),
            WireError::TooLarge(n) => write!(f, "frame of {n} bytes exceeds the size limit"),
            WireError::Malformed(e) => write!(f, "malformed frame: {e}"),
        }
    }
}

impl From<io::Error> for WireError {
    fn from(e: io::Error) -> Self {
        WireError::Io(e)
    }
}

pub use tandem_group_api::bytes::{byte_vec, byte_vecs};

/// The one bincode configuration both ends use. The limit makes decoding
/// refuse length prefixes that point past the frame.
fn codec() -> impl Options {
    bincode::DefaultOptions::new().with_fixint_encoding().allow_trailing_bytes().with_limit(MAX_FRAME_BYTES as u64)
}

/// Frames from this size up are encoded and decoded in a blocking section:
/// copying tens of MiB takes the group worker for a long time on a loaded
/// machine (a 72 MiB snapshot, 150-230 ms on the 2-core VM under load), and
/// with one worker (`gcomm.threads`) its heartbeats would wait meanwhile.
/// Below this the hand-off of the worker's tasks costs more than it saves.
pub const BULK_FRAME_BYTES: usize = 8 << 20;

/// Runs `f`, in a blocking section when it handles a frame of `bytes`.
fn for_frame<R>(bytes: usize, f: impl FnOnce() -> R) -> R {
    if bytes >= BULK_FRAME_BYTES {
        crate::sync::blocking_section(f)
    } else {
        f()
    }
}

/// Encodes `req` as one frame; one that carries much data off the worker.
pub fn encode_request(req: &Request) -> Result<Vec<u8>, WireError> {
    let data = req.data_bytes();
    // Sized for the data up front: growing by doubling would copy it again.
    for_frame(data, || encode_frame_sized(req, data + 4096))
}

/// Encodes `value` as one frame, ready for a single write.
pub fn encode_frame<T: Serialize>(value: &T) -> Result<Vec<u8>, WireError> {
    encode_frame_sized(value, 64)
}

fn encode_frame_sized<T: Serialize>(value: &T, capacity: usize) -> Result<Vec<u8>, WireError> {
    let mut buf = Vec::with_capacity(capacity.min(MAX_FRAME_BYTES + 4));
    buf.extend_from_slice(&[0u8; 4]);
    codec().serialize_into(&mut buf, value).map_err(|e| match *e {
        bincode::ErrorKind::SizeLimit => WireError::TooLarge(MAX_FRAME_BYTES + 1),
        other => WireError::Malformed(other.to_string()),
    })?;
    let len = buf.len() - 4;
    if len > MAX_FRAME_BYTES {
        return Err(WireError::TooLarge(len));
    }
    buf[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(buf)
}

pub async fn write_frame<W, T>(w: &mut W, value: &T) -> Result<(), WireError>
where
    W: AsyncWrite + Unpin,
    T: Serialize,
{
    let buf = encode_frame(value)?;
    w.write_all(&buf).await?;
    // A TLS stream may hold the record back until flushed.
    w.flush().await?;
    Ok(())
}

/// Largest handshake frame: it is read before we know who is calling, so a
/// stranger must not make us allocate a full frame's worth.
pub const MAX_HELLO_BYTES: usize = 64 << 10;

pub async fn read_frame<R, T>(r: &mut R) -> Result<T, WireError>
where
    R: AsyncRead + Unpin,
    T: DeserializeOwned,
{
    read_frame_limited(r, MAX_FRAME_BYTES).await
}

/// What a frame's buffer starts at before its bytes arrive.
const READ_STEP: usize = 1 << 20;

/// Reads one frame of at most `max` bytes.
pub async fn read_frame_limited<R, T>(r: &mut R, max: usize) -> Result<T, WireError>
where
    R: AsyncRead + Unpin,
    T: DeserializeOwned,
{
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(WireError::Closed),
        Err(e) => return Err(WireError::Io(e)),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(WireError::TooLarge(len));
    }
    let buf = read_body(r, len).await?;
    for_frame(len, || decode(&buf))
}

/// The `len` bytes of a frame's body. The buffer grows as bytes come in, so
/// a peer that announces a gigabyte and sends nothing costs us nothing; it
/// doubles up to `len` and never past it (a frame of 257 MiB no longer
/// holds 512 MiB while it is decoded).
async fn read_body<R: AsyncRead + Unpin>(r: &mut R, len: usize) -> Result<Vec<u8>, WireError> {
    let mut buf = Vec::with_capacity(len.min(READ_STEP));
    while buf.len() < len {
        if buf.len() == buf.capacity() {
            buf.reserve_exact(buf.capacity().min(len - buf.len()));
        }
        // One read into the room there is (`read_to_end` would grow the
        // buffer past it), never past the frame.
        let got = (&mut *r).take((len - buf.len()) as u64).read_buf(&mut buf).await?;
        if got == 0 {
            return Err(WireError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the frame ended after {} of its {len} bytes", buf.len()),
            )));
        }
    }
    Ok(buf)
}

pub fn decode<T: DeserializeOwned>(buf: &[u8]) -> Result<T, WireError> {
    codec().deserialize(buf).map_err(|e| WireError::Malformed(e.to_string()))
}

/// What the first eight bytes of a connection said.
#[derive(Debug, PartialEq, Eq)]
pub enum Preamble {
    Tandem {
        version: u32,
    },
    /// Not a Tandem peer at all: these were its first bytes.
    BadMagic([u8; 4]),
}

pub async fn write_preamble<W: AsyncWrite + Unpin>(w: &mut W) -> io::Result<()> {
    let mut buf = [0u8; 8];
    buf[..4].copy_from_slice(&MAGIC);
    buf[4..].copy_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    w.write_all(&buf).await?;
    w.flush().await
}

pub async fn read_preamble<R: AsyncRead + Unpin>(r: &mut R) -> io::Result<Preamble> {
    let mut magic = [0u8; 4];
    r.read_exact(&mut magic).await?;
    if magic != MAGIC {
        return Ok(Preamble::BadMagic(magic));
    }
    let mut version = [0u8; 4];
    r.read_exact(&mut version).await?;
    Ok(Preamble::Tandem { version: u32::from_be_bytes(version) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
    }

    #[test]
    fn frame_round_trip() {
        let hello = Hello { cluster: "c".into(), member: 42, info: MemberInfo::default(), group: Some([7; 16]) };
        let buf = encode_frame(&hello).unwrap();
        let back: Hello = block_on(read_frame(&mut &buf[..])).unwrap();
        assert_eq!(back.member, 42);
        assert_eq!(back.cluster, "c");
        assert_eq!(back.group, Some([7; 16]));
    }

    /// A reader that hands out at most `step` bytes per read, as a socket
    /// does when a large frame arrives in pieces.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl tokio::io::AsyncRead for Trickle<'_> {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            out: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            let n = self.step.min(self.data.len()).min(out.remaining());
            out.put_slice(&self.data[..n]);
            self.data = &self.data[n..];
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn a_large_body_is_held_in_exactly_its_size_and_the_next_frame_is_left_alone() {
        // Just over two steps: growing by doubling would reach 4 MiB.
        let len = 2 * READ_STEP + 12_345;
        let body: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut stream = body.clone();
        stream.extend_from_slice(b"next frame");
        for step in [len + 100, 64 * 1024, 1000] {
            let mut r = Trickle { data: &stream, step };
            let got = block_on(read_body(&mut r, len)).expect("body");
            assert!(got == body, "step {step}: the body's bytes, in order");
            assert_eq!(got.capacity(), len, "step {step}: no room beyond the frame");
            assert_eq!(r.data, b"next frame", "step {step}: nothing of the next frame read");
        }
    }

    #[test]
    fn a_body_cut_short_says_how_much_came() {
        let mut r = Trickle { data: &[1u8; 10], step: 3 };
        let err = block_on(read_body(&mut r, 25)).unwrap_err();
        assert!(err.to_string().contains("ended after 10 of its 25 bytes"), "{err}");
    }

    #[test]
    fn oversized_length_is_refused_before_allocating() {
        let buf = (u32::MAX).to_be_bytes();
        let err = block_on(read_frame::<_, Hello>(&mut &buf[..])).unwrap_err();
        assert!(matches!(err, WireError::TooLarge(n) if n == u32::MAX as usize), "{err}");
    }

    /// A frame larger than the old 64 MiB cap (a snapshot after a bulk
    /// load) goes through whole.
    #[test]
    fn frames_over_64_mib_round_trip() {
        let big: Vec<u8> = (0..(80usize << 20)).map(|i| (i % 253) as u8).collect();
        let buf = encode_frame(&big).unwrap();
        let back: Vec<u8> = block_on(read_frame(&mut &buf[..])).unwrap();
        assert!(back == big, "the 80 MiB frame came back different");
    }

    /// A request that carries tens of MiB is encoded and decoded in a
    /// blocking section on the group runtime: the bytes are the same as
    /// those of a plain encode, and they read back.
    #[test]
    fn bulk_requests_encode_alike_on_and_off_the_runtime() {
        use crate::raft::types::Bytes;
        let data: Vec<u8> = (0..BULK_FRAME_BYTES + 5).map(|i| (i % 251) as u8).collect();
        let snapshot = Request::Snapshot { vote: Vote::new(3, 7), meta: SnapshotMeta::default(), data: data.clone() };
        assert_eq!(snapshot.data_bytes(), data.len());
        let forward = Request::Forward {
            payloads: (0..3).map(|i| AppPayload { origin: i, bytes: Bytes::from(vec![0u8; 10]) }).collect(),
        };
        assert_eq!(forward.data_bytes(), 30);
        assert_eq!(Request::Keepalive.data_bytes(), 0);

        let plain = encode_frame(&snapshot).unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
        let (on_runtime, back) = runtime.block_on(async {
            // On a worker, as the transport runs: the blocking section.
            tokio::spawn(async move {
                let frame = encode_request(&snapshot).unwrap();
                let back: Request = read_frame(&mut &frame[..]).await.unwrap();
                (frame, back)
            })
            .await
            .unwrap()
        });
        assert!(on_runtime == plain, "the same bytes as a plain encode");
        let Request::Snapshot { data: got, vote, .. } = back else {
            panic!("not a snapshot: {}", back.name());
        };
        assert_eq!(vote, Vote::new(3, 7));
        assert!(got == data, "the snapshot data came back different");
    }

    /// A byte string field reads back, and its bytes are those of a plain
    /// `Vec<u8>`: peers built before it still understand it.
    #[test]
    fn byte_strings_are_encoded_as_a_vec_of_u8_is() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct AsBytes(#[serde(with = "byte_vec")] Vec<u8>);
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct AsSeq(Vec<u8>);
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let bytes = encode_frame(&AsBytes(data.clone())).unwrap();
        assert_eq!(bytes, encode_frame(&AsSeq(data.clone())).unwrap());
        let back: AsBytes = block_on(read_frame(&mut &bytes[..])).unwrap();
        assert_eq!(back.0, data);
    }

    /// As above for a sequence of byte strings (a key's parts).
    #[test]
    fn byte_string_sequences_are_encoded_as_a_vec_of_vec_of_u8_is() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct AsBytes(#[serde(with = "byte_vecs")] Vec<Vec<u8>>);
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct AsSeq(Vec<Vec<u8>>);
        for data in [vec![], vec![vec![]], vec![b"db".to_vec(), b"t1".to_vec(), vec![0, 1, 255, 7]]] {
            let bytes = encode_frame(&AsBytes(data.clone())).unwrap();
            assert_eq!(bytes, encode_frame(&AsSeq(data.clone())).unwrap());
            let back: AsBytes = block_on(read_frame(&mut &bytes[..])).unwrap();
            assert_eq!(back.0, data);
            let plain: AsSeq = block_on(read_frame(&mut &bytes[..])).unwrap();
            assert_eq!(plain.0, data);
        }
    }

    /// A peer that announces a large frame and stops is an error at the end
    /// of its bytes, not a wait or a gigabyte allocated up front.
    #[test]
    fn a_frame_cut_short_is_an_error() {
        let mut buf = ((512u32) << 20).to_be_bytes().to_vec();
        buf.extend_from_slice(&[0; 100]);
        let err = block_on(read_frame::<_, Vec<u8>>(&mut &buf[..])).unwrap_err();
        assert!(err.to_string().contains("after 100 of its"), "{err}");
    }

    #[test]
    fn handshake_frames_have_a_small_limit() {
        let buf = ((MAX_HELLO_BYTES + 1) as u32).to_be_bytes();
        let err = block_on(read_frame_limited::<_, Hello>(&mut &buf[..], MAX_HELLO_BYTES)).unwrap_err();
        assert!(matches!(err, WireError::TooLarge(_)), "{err}");
    }

    #[test]
    fn garbage_frame_is_malformed_not_a_panic() {
        let mut buf = 16u32.to_be_bytes().to_vec();
        buf.extend([0xff; 16]);
        let err = block_on(read_frame::<_, Request>(&mut &buf[..])).unwrap_err();
        assert!(matches!(err, WireError::Malformed(_)), "{err}");
    }

    #[test]
    fn lying_inner_length_is_malformed() {
        // A Hello whose cluster-name length claims far more bytes than the frame holds.
        let mut body = (1u64 << 40).to_le_bytes().to_vec();
        body.extend(b"abc");
        let mut buf = (body.len() as u32).to_be_bytes().to_vec();
        buf.extend(body);
        let err = block_on(read_frame::<_, Hello>(&mut &buf[..])).unwrap_err();
        assert!(matches!(err, WireError::Malformed(_)), "{err}");
    }

    #[test]
    fn clean_close_between_frames() {
        let err = block_on(read_frame::<_, Hello>(&mut &[][..])).unwrap_err();
        assert!(matches!(err, WireError::Closed));
    }

    #[test]
    fn preamble_detects_strangers() {
        let got = block_on(read_preamble(&mut &b"GET / HTTP/1.1"[..])).unwrap();
        assert_eq!(got, Preamble::BadMagic(*b"GET "));
        let mut ours = Vec::new();
        block_on(write_preamble(&mut ours)).unwrap();
        let got = block_on(read_preamble(&mut &ours[..])).unwrap();
        assert_eq!(got, Preamble::Tandem { version: PROTOCOL_VERSION });
    }
}
