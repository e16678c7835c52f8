//! The listening side: accept connections, run the handshake, then answer
//! requests one at a time per connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use log::{debug, error, info, warn};
use tokio::net::TcpStream;

use super::handshake::{self, HANDSHAKE_TIMEOUT};
use super::tls::{self, Opening, PeerStream};
use super::wires::{Accepted, GroupListener};
use super::{refusals, NetCtx, TlsMode};
use crate::injected::{self, Defect};
use crate::raft::types::Snapshot;
use crate::shared::Shared;
use crate::wire::{self, Request, Response, WireError};
use crate::{join, submit, MemberId};

/// A connection silent this long is closed. Peers that vanish without a FIN
/// (power loss, a cable) would otherwise pin a task and a socket forever;
/// dialers notice the close before reusing the connection.
const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

pub async fn serve(mut listener: GroupListener, shared: Arc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                tokio::spawn(serve_conn(shared.clone(), stream, peer));
            }
            Err(e) => {
                // Typically EMFILE: back off instead of spinning.
                warn!("Group listener failed to accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn serve_conn(shared: Arc<Shared>, accepted: Accepted, peer: SocketAddr) {
    if shared.net.isolated() {
        return; // gmcast.isolate: as if nobody listened
    }
    let refusal = admission(&shared.net, peer).await;
    let secured = match accepted {
        Accepted::Tcp(tcp) => {
            let _ = tcp.set_nodelay(true);
            secure(&shared.net, tcp, peer).await
        }
        // A given network is plaintext (`start` refuses TLS with it).
        Accepted::Given(link) => Some(PeerStream::Given(link)),
    };
    let Some(mut stream) = secured else {
        return;
    };
    // Refused by the allowlist: told so once the channel is up (inside TLS
    // when TLS is on), so that the dialler logs why.
    if let Some(reason) = refusal {
        handshake::refuse_peer(&mut stream, &reason).await;
        return;
    }
    let cluster = shared.config.cluster_name.clone();
    let me = handshake::Us { cluster: &cluster, member: shared.me, group: shared.net.group(), net: &shared.net };
    let Some(hello) = handshake::accept(&mut stream, &me, peer).await else {
        return;
    };
    let from = hello.member;
    shared.net.note_link(&hello.info.group_addr, stream.is_encrypted());
    debug!("Accepted connection from member {from} ({}) at {peer}", hello.info.name);
    serve_requests(&shared, &mut stream, from, peer).await;
}

/// Answers `from`'s requests one at a time, until the connection ends.
async fn serve_requests(shared: &Shared, stream: &mut PeerStream, from: MemberId, peer: SocketAddr) {
    // Set once this connection is handed forwarded payloads back.
    let mut handing_back = None;
    loop {
        let req: Request = match tokio::time::timeout(IDLE_TIMEOUT, wire::read_frame(&mut *stream)).await {
            Err(_idle) => return,
            Ok(Ok(req)) => req,
            Ok(Err(WireError::Closed)) => return,
            // A reset by a peer that stops or crashes is routine.
            Ok(Err(WireError::Io(e))) => {
                info!("Connection from member {from} at {peer} lost: {e}");
                return;
            }
            Ok(Err(e)) => {
                error!("Closing connection from member {from} at {peer}: {e}");
                return;
            }
        };
        if shared.net.isolated() {
            return; // isolated since this connection opened
        }
        // Once this connection handed payloads back, it hands back every
        // later one too: the follower sends what came back ahead of what
        // follows, so taking a later frame would order it before an earlier
        // one. (A follower evicted and taken back at once had its early
        // frames handed back, as from an outsider, and its later ones taken:
        // the simulation's held links saw its payloads ordered out of turn.)
        let refusal = match &req {
            Request::Forward { .. }
                if handing_back.is_some() && !injected::active(Defect::TakesForwardsAfterHandingBack) =>
            {
                Some("this connection already handed forwarded payloads back".to_string())
            }
            _ => refuses(shared, from, &req),
        };
        let resp = match refusal {
            Some(reason) => {
                debug!("Refusing {} from member {from} at {peer}: {reason}", req.name());
                refused_answer(req, reason)
            }
            None => {
                shared.net.liveness.heard(from);
                match dispatch(shared, from, req).await {
                    Some(resp) => resp,
                    None => continue,
                }
            }
        };
        if matches!(resp, Response::Returned { .. }) && handing_back.is_none() {
            handing_back = Some(shared.forwards.handing_back());
        }
        if let Err(e) = wire::write_frame(&mut *stream, &resp).await {
            debug!("Connection from member {from} at {peer} closed while answering: {e}");
            return;
        }
    }
}

/// The answer to a refused request. Forwarded payloads are handed back,
/// not failed: they were not taken, and the follower sends them on to the
/// next leader it hears of.
fn refused_answer(req: Request, reason: String) -> Response {
    match req {
        Request::Forward { payloads } => Response::Returned { payloads },
        _ => Response::Failed { reason },
    }
}

/// Why the server's allowlist (`wsrep_allowlist`) refuses this peer, if it
/// does. Galera asks on every accepted connection, before anything else.
async fn admission(net: &NetCtx, peer: SocketAddr) -> Option<String> {
    let admit = net.admission.clone()?;
    let ip = peer.ip().to_canonical();
    let allowed = tokio::task::spawn_blocking(move || (admit.0)(ip)).await.unwrap_or(false);
    if allowed {
        return None;
    }
    // A warning, as Galera's line (which MTR's suppressions name): the
    // operator's own list doing its work, not a fault of this member.
    net.noted_at(log::Level::Warn, &ip.to_string(), "allowlist", || {
        format!("Connection not allowed, IP {ip} not found in allowlist (connection from {peer}); closing")
    });
    Some(format!("your address {ip} {} of this member", handshake::NOT_IN_ALLOWLIST))
}

/// The connection as this member's TLS mode wants it; `None` (logged) when
/// it is refused. Bounded like the handshake, so that a silent or slow peer
/// cannot pin a task.
async fn secure(net: &NetCtx, tcp: TcpStream, peer: SocketAddr) -> Option<PeerStream> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, secure_within(net, tcp, peer)).await {
        Ok(stream) => stream,
        Err(_) => {
            net.refused(&peer.ip().to_string(), "slow", || {
                format!("Connection from {peer} did not complete its handshake in {HANDSHAKE_TIMEOUT:?}; closing")
            });
            None
        }
    }
}

/// How the peer opens the connection (TLS or not); `None` (logged) when it
/// closed or failed before its first byte.
async fn opening_of(net: &NetCtx, tcp: &TcpStream, peer: SocketAddr) -> Option<Opening> {
    let who = peer.ip().to_string();
    match tls::opening(tcp).await {
        Ok(opening) => Some(opening),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            // Closed without a byte sent: nothing was refused. A port probe
            // (a load balancer's TCP check), or a peer that gave up a dial it
            // no longer needed, does this; an error line for each would
            // drown the ones that say something. A peer that connects and
            // stays silent is still an error, after HANDSHAKE_TIMEOUT.
            net.noted_at(log::Level::Info, &who, "silent", || {
                format!("Connection from {peer} closed before sending anything; ignoring it")
            });
            None
        }
        Err(e) => {
            net.refused(&who, "silent", || format!("Connection from {peer} failed before its handshake: {e}"));
            None
        }
    }
}

async fn secure_within(net: &NetCtx, tcp: TcpStream, peer: SocketAddr) -> Option<PeerStream> {
    let who = peer.ip().to_string();
    let opening = opening_of(net, &tcp, peer).await?;
    match (&net.tls, opening) {
        (TlsMode::Off, Opening::Plain) => Some(PeerStream::Plain(tcp)),
        (TlsMode::Off, Opening::Tls) => {
            // A note, not an error: during a rolling switch-over a member
            // with socket.dynamic=YES tries TLS first, then plaintext. A
            // member that requires TLS logs the failure on its side.
            net.noted_at(log::Level::Info, &who, "TLS to plaintext", || {
                format!(
                    "Connection from {peer} starts a TLS handshake, but this member does not encrypt \
                     the group channel (socket.ssl=NO); closing"
                )
            });
            None
        }
        (TlsMode::Required(_), Opening::Plain) => {
            net.refused(&who, "plaintext to TLS", || {
                format!(
                    "Connection from {peer} did not start a TLS handshake, and this member requires TLS \
                     (socket.ssl=YES); closing"
                )
            });
            let mut plain = PeerStream::Plain(tcp);
            handshake::refuse_peer(&mut plain, "this member requires TLS (socket.ssl=YES)").await;
            None
        }
        (TlsMode::Dynamic(_), Opening::Plain) => {
            debug!("Accepting a plaintext connection from {peer} (socket.dynamic=YES)");
            Some(PeerStream::Plain(tcp))
        }
        (TlsMode::Required(tls) | TlsMode::Dynamic(tls), Opening::Tls) => {
            match tls.accept(tcp).await {
                Ok(stream) => Some(stream),
                Err(e) => {
                    let why = e.to_string();
                    let key = refusals::reason_key("TLS handshake", &why);
                    let line = || format!("TLS handshake with {peer} failed: {why}; closing");
                    if super::closed_on_hello(&e) {
                        // The dialler closed in the middle of the handshake:
                        // nothing was refused here. A member that gave up a
                        // dial (its own timeout, on a starved CPU, or a
                        // request it no longer needs) does this, and logs
                        // on its side whatever that failure costs it.
                        net.noted_at(log::Level::Info, &who, &key, || {
                            format!("{} (the dialling peer hung up during the handshake)", line())
                        });
                    } else if super::tls::peer_sent_alert(&why) {
                        // The dialler ended the handshake (most often: it does
                        // not trust *our* certificate) and logs why at error
                        // level on its side; a certificate of ours the others
                        // refuse shows up as an error here too, the next time
                        // this member dials out. Here it is a note: after FLUSH
                        // SSL to a certificate the others do not trust, a
                        // member leaving opens a last connection, and a clean
                        // shutdown is no error.
                        net.noted_at(log::Level::Info, &who, &key, || {
                            format!("{} (the dialling peer ended the handshake; its log says why)", line())
                        });
                    } else {
                        net.refused(&who, &key, line);
                    }
                    None
                }
            }
        }
    }
}

/// Why this member does not take `req` from member `from`, if it does not.
///
/// - Raft's traffic and the mesh's from a member outside this one's
///   membership, while this one is in it: a member the group removed, or
///   one still in a group this one formed without it (a weighted majority
///   going on alone, `pc.bootstrap`). Its votes must not unseat our leader
///   and its appends must not overwrite our log; it asks to join instead,
///   which is always heard.
/// - A vote, while the members this one is in touch with do not weigh
///   enough to be primary (`pc.weight`): heads alone would elect a leader
///   on the light side of a partition, which then commits what the heavy
///   side never sees.
/// - A vote, from a restored member that started only just now: it may
///   have acknowledged the leader just before it stopped, and that leader
///   may still answer causal reads on the strength of it
///   ([`crate::read::votes_withheld`]).
fn refuses(shared: &Shared, from: MemberId, req: &Request) -> Option<String> {
    let membership_only = matches!(
        req,
        Request::AppendEntries(_)
            | Request::Vote(_)
            | Request::PreVote(_)
            | Request::Snapshot { .. }
            | Request::TransferLeader(_)
            | Request::Keepalive
            | Request::Forward { .. }
            | Request::ReadIndex { .. }
    );
    if membership_only {
        let outsider = shared.with_metrics(|m| {
            let membership = m.membership_config.membership();
            membership.get_node(&shared.me).is_some() && membership.get_node(&from).is_none()
        });
        if outsider {
            return Some(format!("member {from} is not in the group of member {}; it may ask to join", shared.me));
        }
    }
    if matches!(req, Request::Vote(_) | Request::PreVote(_)) {
        if let Some(why) = crate::detector::outweighed(shared) {
            return Some(format!("no vote while {why}"));
        }
        let transfer = matches!(req, Request::Vote(r) | Request::PreVote(r) if r.leadership_transfer);
        if let Some(left) = crate::read::votes_withheld(shared, transfer) {
            return Some(format!("no vote for another {left:?} after a restart"));
        }
    }
    None
}

/// The answer to `req`; none for forwarded payloads that were taken (a
/// follower does not wait for one, see `forward`).
async fn dispatch(shared: &Shared, from: MemberId, req: Request) -> Option<Response> {
    let raft = shared.raft();
    Some(match req {
        Request::AppendEntries(rpc) => {
            shared.net.liveness.append_from(from);
            raft.append_entries(rpc).await.map_or_else(failed, Response::AppendEntries)
        }
        Request::Vote(rpc) => raft.vote(rpc).await.map_or_else(failed, Response::Vote),
        Request::PreVote(rpc) => raft.pre_vote(rpc).await.map_or_else(failed, Response::Vote),
        Request::Snapshot { vote, meta, data } => {
            let snapshot = Snapshot { meta, snapshot: data };
            raft.install_full_snapshot(vote, snapshot).await.map_or_else(failed, Response::Snapshot)
        }
        Request::TransferLeader(rpc) => {
            raft.handle_transfer_leader(rpc).await.map_or_else(failed, Response::TransferLeader)
        }
        Request::Join { member, info } => join::handle_join(shared, member, info).await,
        Request::Forward { payloads } => return submit::handle_forward(shared, payloads).await,
        Request::Promote { member } => join::handle_promote(shared, member).await,
        Request::Leave { member } => join::handle_leave(shared, member).await,
        Request::LogPosition => Response::LogPosition { last: shared.log.vote_and_last().1 },
        Request::Keepalive => Response::Done,
        Request::ReadIndex { term } => crate::read::handle_read_index(shared, from, term).await,
        Request::SetWeight { member, weight } => crate::weight::handle_set_weight(shared, member, weight).await,
        Request::LogRange => crate::catch_up::handle_range(shared, from),
        Request::ReadLog { from: index, max_bytes } => crate::catch_up::handle_read(shared, from, index, max_bytes),
    })
}

/// Our Raft is stopping or stopped: the caller treats this like a dead peer.
fn failed(e: impl std::fmt::Display) -> Response {
    Response::Failed { reason: e.to_string() }
}
