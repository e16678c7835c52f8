//! TCP transport between members: the dialing side and a small connection
//! pool. The listening side is in [`server`].
//!
//! One request is in flight per connection, but for [`pipeline`]'s
//! (openraft's appends to a follower); concurrency comes from having
//! several connections (openraft opens one client per replication stream, and
//! our own requests take pooled connections).

pub(crate) mod ciphers;
pub mod handshake;
pub mod pipeline;
mod refusals;
pub mod server;
mod source;
pub mod tls;
mod version1;
pub mod wires;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use log::debug;
use tokio::net::TcpStream;

use self::tls::{PeerStream, Tls};
use self::wires::Wires;

use crate::liveness::Liveness;
use crate::sync::lock;
use crate::wire::{self, Hello, Request, Response};
use crate::{Isolation, MemberId};

/// Idle connections kept per peer address; more are simply closed.
const MAX_IDLE_PER_PEER: usize = 4;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// Nothing reached the peer: connecting or the handshake failed.
    Unreachable(String),
    /// The request was sent, but no answer came back: it may have been
    /// carried out. Callers must not blindly resend non-idempotent requests.
    Lost(String),
    /// The peer refused us in the handshake (other cluster, other version).
    Refused(String),
    /// The address is now served by another member than the one we wanted.
    WrongPeer { expected: MemberId, found: MemberId },
    /// The address is our own listener (peer lists usually name every member).
    Myself,
}

impl CallError {
    pub fn unreachable(e: impl fmt::Display) -> Self {
        CallError::Unreachable(e.to_string())
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Unreachable(e) => write!(f, "unreachable: {e}"),
            CallError::Lost(e) => write!(f, "no reply: {e}"),
            CallError::Refused(e) => write!(f, "refused: {e}"),
            CallError::Myself => write!(f, "that address is this member itself"),
            CallError::WrongPeer { expected, found } => {
                write!(f, "expected member {expected} at that address, found member {found}")
            }
        }
    }
}

/// An established, handshaken connection to one member.
pub struct Conn {
    stream: PeerStream,
    peer: MemberId,
    /// The peer's live group when the connection was made.
    group: Option<[u8; 16]>,
    /// Counts it among the links open to its address while it lives, in
    /// the pool, on loan to a caller, or taken for [`NetCtx::open`].
    open: OpenLink,
    /// The isolations before it was made ([`NetCtx::isolate`]).
    epoch: u64,
}

/// One open link to an address, counted out when dropped.
struct OpenLink(Arc<AtomicUsize>);

/// A link of a caller's own ([`NetCtx::open`]), outside the pool: it still
/// counts among the links open to its peer for as long as `held` lives, so
/// that taking it does not make the mesh dial a replacement.
pub struct OwnLink {
    pub stream: PeerStream,
    pub held: Held,
}

/// Keeps an [`OwnLink`] counted among its peer's open links: only its
/// drop matters.
pub struct Held {
    _open: OpenLink,
}

impl Drop for OpenLink {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Conn {
    /// Whether the peer kept this idle connection open. A request on a
    /// connection the peer already closed would fail as "lost", which for a
    /// forward means dropped payloads; checking first avoids that. Idle
    /// means nothing to read: any byte or EOF means the connection is out of
    /// step or closed.
    fn is_open(&mut self) -> bool {
        self.stream.is_idle()
    }
}

/// Whether the group channel is encrypted (`socket.ssl`, `socket.dynamic`).
#[derive(Clone, Debug, Default)]
pub enum TlsMode {
    /// Plaintext both ways; a peer that starts a TLS handshake is refused.
    #[default]
    Off,
    /// TLS both ways, peers verified against the CA; plaintext is refused.
    Required(Arc<Tls>),
    /// Dials with TLS, accepts both (`socket.dynamic`: a rolling switch-over).
    Dynamic(Arc<Tls>),
}

impl TlsMode {
    /// The channel's encryption from its settings (none: plaintext), the
    /// certificate, key and CA loaded and checked now. Says nothing: the
    /// start reports it once, a probe before the start not at all.
    pub fn load(settings: Option<&crate::TlsSettings>) -> Result<TlsMode, String> {
        let Some(settings) = settings else {
            return Ok(TlsMode::Off);
        };
        let tls = Arc::new(Tls::load_with(&settings.files, &settings.policy).map_err(|e| e.to_string())?);
        Ok(if settings.dynamic { TlsMode::Dynamic(tls) } else { TlsMode::Required(tls) })
    }

    pub fn tls(&self) -> Option<&Arc<Tls>> {
        match self {
            TlsMode::Off => None,
            TlsMode::Required(tls) | TlsMode::Dynamic(tls) => Some(tls),
        }
    }
}

/// Everything the dialing side needs, shared by openraft's network clients and
/// our own requests.
pub struct NetCtx {
    pub me: MemberId,
    hello: Hello,
    pool: Mutex<BTreeMap<String, Vec<Conn>>>,
    /// Per address: the links open to it, idle or in use.
    open: Mutex<BTreeMap<String, Arc<AtomicUsize>>>,
    pub liveness: Liveness,
    /// Round trips of pipelined appends, per peer (the leader's send window).
    pub round_trips: crate::round_trips::RoundTrips,
    connect_timeout: Duration,
    pub tls: TlsMode,
    refusals: refusals::Refusals,
    pub admission: Option<crate::Admission>,
    /// The live group this member is in, as the engine announced it.
    group: Mutex<Option<[u8; 16]>>,
    /// The group this member's durable state belongs to: the last live
    /// group it was in, or, restored and not yet live, the history of its
    /// local data (see [`NetCtx::check_moved_on`]).
    former_group: Mutex<Option<[u8; 16]>>,
    /// Per member group address: whether the last connection with it, in
    /// either direction, was encrypted (`wsrep_group_links`).
    links: Mutex<BTreeMap<String, bool>>,
    /// Set once this member leaves the group (a clean shutdown).
    leaving: std::sync::atomic::AtomicBool,
    /// `gmcast.isolate`: while set, nothing is sent or answered.
    isolation: Mutex<Isolation>,
    /// Isolations begun so far: a link made before one is never pooled
    /// again ([`NetCtx::checkin`]).
    isolations: std::sync::atomic::AtomicU64,
    /// A given network to dial on instead of TCP (a simulation's).
    wires: Option<Wires>,
    /// The address outgoing connections leave from ([`source`]).
    source: Option<std::net::IpAddr>,
}

impl NetCtx {
    pub fn new(hello: Hello, connect_timeout: Duration, tls: TlsMode, admission: Option<crate::Admission>) -> Self {
        NetCtx {
            me: hello.member,
            hello,
            pool: Mutex::new(BTreeMap::new()),
            open: Mutex::new(BTreeMap::new()),
            liveness: Liveness::default(),
            round_trips: Default::default(),
            connect_timeout,
            tls,
            refusals: refusals::Refusals::default(),
            admission,
            group: Mutex::new(None),
            former_group: Mutex::new(None),
            links: Mutex::new(BTreeMap::new()),
            leaving: std::sync::atomic::AtomicBool::new(false),
            isolation: Mutex::new(Isolation::Off),
            isolations: std::sync::atomic::AtomicU64::new(0),
            wires: None,
            source: None,
        }
    }

    /// Dials on `wires` instead of TCP, when given (plaintext only: the
    /// caller refuses TLS with it).
    pub fn over(mut self, wires: Option<Wires>) -> Self {
        self.wires = wires;
        self
    }

    /// Dials from the address the group listens on, when it names one
    /// ([`source`] says why).
    pub fn dialling_from(mut self, listen_addr: &str) -> Self {
        self.source = source::source_ip(listen_addr);
        self
    }

    /// `gmcast.isolate`: cuts (or restores) every exchange with the other
    /// members, the pooled connections first. A termination is for good.
    pub fn isolate(&self, to: Isolation) -> Result<(), String> {
        let mut now = lock(&self.isolation);
        if *now == Isolation::Terminated && to != Isolation::Terminated {
            return Err("the group connection was terminated (gmcast.isolate=2): restart the server to rejoin".into());
        }
        *now = to;
        if to != Isolation::Off {
            self.isolations.fetch_add(1, Ordering::AcqRel);
            lock(&self.pool).clear();
        }
        Ok(())
    }

    pub fn isolated(&self) -> bool {
        *lock(&self.isolation) != Isolation::Off
    }

    /// From now on refusals are notes: a member on its way out that meets a
    /// peer refusing it (say, its certificate was just replaced by one the
    /// others do not trust) has nothing left to fix before it is gone, and
    /// the others notice the leave anyway. The line itself is still written.
    pub fn set_leaving(&self) {
        self.leaving.store(true, std::sync::atomic::Ordering::Release);
    }

    pub fn is_leaving(&self) -> bool {
        self.leaving.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Records a connection with the member listening at `addr`.
    pub fn note_link(&self, addr: &str, encrypted: bool) {
        lock(&self.links).insert(addr.to_string(), encrypted);
    }

    pub fn link_encrypted(&self, addr: &str) -> Option<bool> {
        lock(&self.links).get(addr).copied()
    }

    pub fn set_group(&self, group: Option<[u8; 16]>) {
        *lock(&self.group) = group;
    }

    pub fn group(&self) -> Option<[u8; 16]> {
        *lock(&self.group)
    }

    /// Logs a refused connection at error level, once per peer and kind of
    /// refusal per minute (a refused peer retries every few seconds).
    pub fn refused(&self, who: &str, kind: &str, line: impl FnOnce() -> String) {
        if self.leaving.load(std::sync::atomic::Ordering::Acquire) {
            self.noted_at(log::Level::Info, who, kind, || format!("{} (while this member leaves the group)", line()));
        } else {
            self.noted_at(log::Level::Error, who, kind, line);
        }
    }

    /// [`NetCtx::refused`] at another level: an expected moment of a rolling
    /// switch-over to TLS is a note, not an error.
    pub fn noted_at(&self, level: log::Level, who: &str, kind: &str, line: impl FnOnce() -> String) {
        match self.refusals.log_now(who, kind, tokio::time::Instant::now()) {
            Some(left_out) => log::log!(level, "{}{}", line(), refusals::repeats(left_out)),
            None => debug!("{}", line()),
        }
    }

    /// Sends `req` to the member at `addr` and waits for its answer.
    /// `expect` guards against a new incarnation now living at that address.
    pub async fn call(
        &self,
        addr: &str,
        expect: Option<MemberId>,
        req: &Request,
        timeout: Duration,
    ) -> Result<(MemberId, Response), CallError> {
        if self.isolated() {
            return Err(CallError::Unreachable("this member is isolated (gmcast.isolate)".into()));
        }
        let frame = wire::encode_request(req).map_err(|e| {
            warn_unsendable(addr, &e);
            CallError::Unreachable(e.to_string())
        })?;
        let conn = tokio::time::timeout(timeout, self.checkout(addr, expect))
            .await
            .map_err(|_| CallError::Unreachable(format!("no connection to {addr} within {timeout:?}")))??;
        self.exchange(addr, conn, &frame, timeout).await
    }

    /// One request and its answer on `conn`, which goes back to the pool
    /// if the exchange went through.
    async fn exchange(
        &self,
        addr: &str,
        mut conn: Conn,
        frame: &[u8],
        timeout: Duration,
    ) -> Result<(MemberId, Response), CallError> {
        let exchange = async {
            use tokio::io::AsyncWriteExt;
            conn.stream.write_all(frame).await?;
            conn.stream.flush().await?;
            wire::read_frame::<_, Response>(&mut conn.stream).await
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(resp)) => {
                let peer = conn.peer;
                // A peer whose Raft is stopping still answers `Failed`: that
                // is not a member we can count on.
                if !matches!(resp, Response::Failed { .. }) {
                    self.liveness.heard(peer);
                }
                self.checkin(addr, conn);
                Ok((peer, resp))
            }
            Ok(Err(e)) => Err(CallError::Lost(format!("{addr}: {e}"))),
            Err(_) => Err(CallError::Lost(format!("{addr}: no answer within {timeout:?}"))),
        }
    }

    /// Keeps `warm` links open to member `expect` at `addr`, touching one at
    /// a time: while fewer are open, as many new ones as are missing each
    /// carry a keepalive; otherwise the idle link used longest ago carries
    /// one (each idle link in turn, well within the peer's idle timeout).
    /// It never takes more than the one idle link it touches, so a request
    /// that comes meanwhile still finds an idle link rather than dialing: a
    /// new link is made with the certificate held *now*, which after
    /// `socket.ssl_reload` to one the peer does not trust is refused, where
    /// the links already open go on working, as Galera's do.
    pub async fn keepalive(&self, addr: &str, expect: MemberId, warm: usize, timeout: Duration) -> Vec<CallError> {
        if self.isolated() {
            return vec![];
        }
        let frame = match wire::encode_request(&Request::Keepalive) {
            Ok(frame) => frame,
            Err(e) => return vec![CallError::Unreachable(e.to_string())],
        };
        // Idle links the peer closed (it restarted, say) are not links: a
        // new incarnation at the address must get its own at once.
        self.drop_closed(addr, expect);
        let missing = warm.saturating_sub(self.open_to(addr).load(Ordering::Acquire));
        let links: Vec<_> = if missing > 0 {
            let dials = (0..missing).map(|_| async {
                let conn = tokio::time::timeout(timeout, self.dial(addr, true))
                    .await
                    .map_err(|_| CallError::Unreachable(format!("connect to {addr} timed out")))??;
                match conn.peer == expect {
                    true => Ok(conn),
                    false => Err(CallError::WrongPeer { expected: expect, found: conn.peer }),
                }
            });
            futures_util::future::join_all(dials).await
        } else {
            self.least_recently_used(addr, expect).map(Ok).into_iter().collect()
        };
        let exchanges = links.into_iter().map(|link| async {
            let conn = link?;
            self.exchange(addr, conn, &frame, timeout).await.map(|_| ())
        });
        futures_util::future::join_all(exchanges).await.into_iter().filter_map(Result::err).collect()
    }

    /// Drops the idle links to `addr` that are closed or lead to another
    /// member than `expect`.
    fn drop_closed(&self, addr: &str, expect: MemberId) {
        let mut pool = lock(&self.pool);
        if let Some(idle) = pool.get_mut(addr) {
            idle.retain_mut(|conn| conn.peer == expect && conn.is_open());
        }
    }

    /// The idle link to `addr` that waited longest, if one is open.
    fn least_recently_used(&self, addr: &str, expect: MemberId) -> Option<Conn> {
        let mut pool = lock(&self.pool);
        let idle = pool.get_mut(addr)?;
        while !idle.is_empty() {
            let mut conn = idle.remove(0);
            if conn.is_open() && conn.peer == expect {
                return Some(conn);
            }
        }
        None
    }

    /// The count of links open to `addr`. Forgets the addresses no link
    /// and no caller holds a count of (a member gone, or moved): each link
    /// holds its address's count, so an entry held only here counts none.
    fn open_to(&self, addr: &str) -> Arc<AtomicUsize> {
        let mut open = lock(&self.open);
        open.retain(|at, count| at == addr || Arc::strong_count(count) > 1);
        open.entry(addr.to_string()).or_default().clone()
    }

    /// A connection of the caller's own to member `expect` at `addr`, outside
    /// the pool: for a stream of requests whose answers the caller reads
    /// itself (`forward`). An idle pooled link if there is one: it was made
    /// with the identity held when it was made, so a follower whose leader
    /// changed after a `socket.ssl_reload` to a certificate its peers do not
    /// trust still reaches the new leader, as a Galera node goes on over
    /// the links it has. (A new link would be refused, and every payload
    /// the node's clients commit would be lost with it.) The mesh keeps the
    /// pool filled, and the link taken still counts while `held` lives.
    pub async fn open(&self, addr: &str, expect: MemberId) -> Result<OwnLink, CallError> {
        if self.isolated() {
            return Err(CallError::Unreachable("this member is isolated (gmcast.isolate)".into()));
        }
        let conn = match self.least_recently_used(addr, expect) {
            Some(idle) => idle,
            None => self.connect(addr).await?,
        };
        if conn.peer != expect {
            return Err(CallError::WrongPeer { expected: expect, found: conn.peer });
        }
        Ok(OwnLink { stream: conn.stream, held: Held { _open: conn.open } })
    }

    async fn checkout(&self, addr: &str, expect: Option<MemberId>) -> Result<Conn, CallError> {
        loop {
            let pooled = lock(&self.pool).get_mut(addr).and_then(Vec::pop);
            let Some(mut conn) = pooled else { break };
            if conn.is_open() && expect.is_none_or(|e| e == conn.peer) {
                return Ok(conn);
            }
        }
        let conn = self.connect(addr).await?;
        match expect {
            Some(expected) if expected != conn.peer => Err(CallError::WrongPeer { expected, found: conn.peer }),
            _ => Ok(conn),
        }
    }

    /// Pools an idle link again, unless an isolation began since it was
    /// made: a link in use when the isolation cleared the pool came back
    /// after it, and outlived the isolation, so that a peer that refused
    /// this member meanwhile (its allowlist changed) still answered on it
    /// (admission judges a link when it is made). The MTR test
    /// galera_allowlist's race, seen once in `make test` as "more advanced
    /// log" in `admission.rs`.
    fn checkin(&self, addr: &str, conn: Conn) {
        if conn.epoch != self.isolations.load(Ordering::Acquire) || self.isolated() {
            return;
        }
        let mut pool = lock(&self.pool);
        let idle = pool.entry(addr.to_string()).or_default();
        if idle.len() < MAX_IDLE_PER_PEER {
            idle.push(conn);
        }
    }

    async fn connect(&self, addr: &str) -> Result<Conn, CallError> {
        self.dial(addr, false).await
    }

    /// Makes a link to `addr`. A `spare` is one the mesh keeps warm ahead of
    /// need ([`NetCtx::keepalive`]): while other links to the peer are open,
    /// a refusal of a spare is a note, for nothing waits on it and the
    /// member goes on over those links, as a Galera node does on the links
    /// it has after a `socket.ssl_reload` its peers do not trust. (The
    /// mesh tops up the links to a leader that is leaving, whose follower
    /// just closed its forwarding link, a moment before the leave is
    /// ordered: MTR's galera_ssl_reload at its final shutdown.) A link
    /// something waits on is refused with an error.
    async fn dial(&self, addr: &str, spare: bool) -> Result<Conn, CallError> {
        let mut stream = match &self.wires {
            Some(wires) => self.connect_given(wires, addr).await?,
            None => self.connect_secured(addr).await?,
        };
        let epoch = self.isolations.load(Ordering::Acquire);
        let hello = Hello { group: self.group(), ..self.hello.clone() };
        let (peer, peer_group) = match handshake::dial(&mut stream, &hello, addr, self).await {
            // With TLS 1.3 a listener checks our certificate after we think
            // the handshake done: its verdict arrives as an alert on the
            // first read, here.
            Err(CallError::Unreachable(e)) if stream.is_encrypted() && tls::peer_sent_alert(&e) => {
                let why = format!(
                    "Member at {addr} refused our TLS certificate: {e} (is socket.ssl_cert signed by its \
                     socket.ssl_ca, and valid now?)"
                );
                let kind = if spare { "TLS certificate, spare link" } else { "TLS certificate" };
                let key = refusals::reason_key(kind, &e);
                match self.open_to(addr).load(Ordering::Acquire) {
                    open if spare && open > 0 => self.noted_at(log::Level::Info, addr, &key, || {
                        format!("{why}: a spare link; the {open} open to it go on")
                    }),
                    _ => self.refused(addr, &key, || why.clone()),
                }
                return Err(CallError::Refused(why));
            }
            other => other?,
        };
        if peer == self.me {
            return Err(CallError::Myself);
        }
        self.check_moved_on(addr, peer_group)?;
        debug!("Connected to member {peer} at {addr}");
        self.note_link(addr, stream.is_encrypted());
        let open = self.open_to(addr);
        open.fetch_add(1, Ordering::AcqRel);
        Ok(Conn { stream, peer, group: peer_group, open: OpenLink(open), epoch })
    }

    /// The group uuid of the primary component the member at `addr` is in,
    /// if any: a connection made and closed only to ask.
    pub async fn live_group_at(&self, addr: &str) -> Result<Option<[u8; 16]>, CallError> {
        Ok(self.connect(addr).await?.group)
    }

    /// A restored member that is in no live group yet, whose peer is live in
    /// another group than the one its durable state belongs to: the cluster
    /// moved on to a new history (a node bootstrapped it from data with no
    /// saved position) and that state can never rejoin it. Joining anyway
    /// would mix two groups' logs under one membership, and the group would
    /// evict the silent member over and over; so it is refused here, with
    /// what to do. A restart sets the state aside (`RaftGroup::open` asks
    /// the peers first) and the node joins as a new member.
    fn check_moved_on(&self, addr: &str, peer_group: Option<[u8; 16]>) -> Result<(), CallError> {
        let former = *lock(&self.former_group);
        let (Some(theirs), Some(ours), None) = (peer_group, former, self.group()) else {
            return Ok(());
        };
        if theirs == ours {
            return Ok(());
        }
        let (theirs, ours) = (handshake::uuid_text(&theirs), handshake::uuid_text(&ours));
        let why = format!(
            "the member at {addr} is live in group {theirs}, a new history; this member's durable state \
             belongs to group {ours}, which that cluster left. Restart this node: it then sets that state \
             aside and joins group {theirs} as a new member, with a full state transfer"
        );
        self.refused(addr, &format!("moved on to {theirs}"), || format!("Cannot rejoin: {why}"));
        Err(CallError::Refused(why))
    }

    /// See [`NetCtx::check_moved_on`]; `None` once the member is in a live
    /// group again.
    pub fn set_former_group(&self, group: Option<[u8; 16]>) {
        *lock(&self.former_group) = group;
    }

    pub fn former_group(&self) -> Option<[u8; 16]> {
        *lock(&self.former_group)
    }

    /// A TCP connection, with TLS when the channel is encrypted.
    async fn connect_secured(&self, addr: &str) -> Result<PeerStream, CallError> {
        let tcp = self.connect_tcp(addr).await?;
        Ok(match self.tls.tls() {
            None => PeerStream::Plain(tcp),
            Some(tls) => match self.secure(tls, tcp, addr).await {
                Ok(stream) => stream,
                // A member not yet switched over to TLS closes on our
                // ClientHello: during a rolling switch-over, talk plaintext.
                Err(e) if matches!(self.tls, TlsMode::Dynamic(_)) && closed_on_hello(&e) => {
                    self.noted_at(log::Level::Info, addr, "plaintext fallback", || {
                        format!("Member at {addr} does not speak TLS yet: connecting in plaintext (socket.dynamic=YES)")
                    });
                    PeerStream::Plain(self.connect_tcp(addr).await?)
                }
                Err(e) => {
                    let hint = if closed_on_hello(&e) { " (does it have socket.ssl=YES?)" } else { "" };
                    let why = format!("TLS handshake with {addr} failed: {e}{hint}");
                    self.refused(addr, &refusals::reason_key("TLS handshake", &e.to_string()), || why.clone());
                    return Err(CallError::Refused(why));
                }
            },
        })
    }

    async fn connect_given(&self, wires: &Wires, addr: &str) -> Result<PeerStream, CallError> {
        let link = tokio::time::timeout(self.connect_timeout, wires.0.connect(addr))
            .await
            .map_err(|_| CallError::Unreachable(format!("connect to {addr} timed out")))?
            .map_err(|e| CallError::Unreachable(format!("connect to {addr}: {e}")))?;
        Ok(PeerStream::Given(link))
    }

    async fn connect_tcp(&self, addr: &str) -> Result<TcpStream, CallError> {
        let stream = tokio::time::timeout(self.connect_timeout, source::connect(addr, self.source))
            .await
            .map_err(|_| CallError::Unreachable(format!("connect to {addr} timed out")))?
            .map_err(|e| CallError::Unreachable(format!("connect to {addr}: {e}")))?;
        // Heartbeats and small appends must not wait for Nagle.
        stream.set_nodelay(true).map_err(CallError::unreachable)?;
        Ok(stream)
    }

    async fn secure(&self, tls: &Tls, tcp: TcpStream, addr: &str) -> std::io::Result<PeerStream> {
        tokio::time::timeout(self.connect_timeout, tls.connect(tcp, addr))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer to our ClientHello"))?
    }
}

/// The other end closed or reset the connection during the TLS handshake:
/// the dialler's view of a listener that refused it, and the listener's of
/// a dialler that gave up. A dialler that sees it on its ClientHello
/// typically reached a member without TLS.
pub(super) fn closed_on_hello(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionReset, UnexpectedEof};
    matches!(e.kind(), UnexpectedEof | ConnectionReset | BrokenPipe)
}

/// A message that cannot be encoded (over the frame cap) fails the same
/// way on every retry: said in the log, at most once a minute, rather than
/// leaving a member to wait in silence.
pub(crate) fn warn_unsendable(addr: &str, e: &wire::WireError) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST_WARNED_S: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let last = LAST_WARNED_S.load(Ordering::Relaxed);
    if now >= last + 60 && LAST_WARNED_S.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
        log::warn!("Cannot send a message to {addr}: {e}; it is retried, and fails the same way");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_counts_forget_the_addresses_no_link_holds() {
        let hello = Hello { cluster: "c".into(), member: 1, info: crate::MemberInfo::default(), group: None };
        let net = NetCtx::new(hello, Duration::from_secs(1), TlsMode::Off, None);
        let link = net.open_to("a:1");
        link.fetch_add(1, Ordering::AcqRel);
        let link = OpenLink(link);
        assert_eq!(net.open_to("b:2").load(Ordering::Acquire), 0);
        assert_eq!(net.open_to("c:3").load(Ordering::Acquire), 0);
        let addresses = |net: &NetCtx| lock(&net.open).keys().cloned().collect::<Vec<_>>();
        assert_eq!(addresses(&net), ["a:1", "c:3"], "b:2 forgotten, a:1 held by its link");
        assert_eq!(net.open_to("a:1").load(Ordering::Acquire), 1, "the link's own count");
        drop(link);
        assert_eq!(net.open_to("d:4").load(Ordering::Acquire), 0);
        assert_eq!(addresses(&net), ["d:4"]);
    }
}
