//! Both sides of the connection handshake (see [`crate::wire`]).
//!
//! A stranger (wrong magic), an incompatible version or another cluster is
//! logged as an error naming what differed, and the connection is dropped.
//! The listener keeps serving everybody else.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};

use super::{CallError, NetCtx};
use crate::wire::{self, Hello, HelloReply, Preamble, PROTOCOL_VERSION};
use crate::MemberId;

/// A peer that does not finish its handshake in this time is dropped, so a
/// silent port scanner cannot pin a task forever.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Dialer side: send our hello, return the id of the member that answered
/// and the live group it is in.
/// A refusal is logged through `net`, once per peer and reason per minute:
/// we retry a refusing peer every few seconds.
pub async fn dial<S>(
    stream: &mut S,
    hello: &Hello,
    addr: &str,
    net: &NetCtx,
) -> Result<(MemberId, Option<[u8; 16]>), CallError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    wire::write_preamble(stream).await.map_err(CallError::unreachable)?;
    wire::write_frame(stream, hello).await.map_err(CallError::unreachable)?;
    match wire::read_preamble(stream).await.map_err(CallError::unreachable)? {
        Preamble::BadMagic(bytes) => {
            net.refused(addr, "not a Tandem peer", || {
                format!("Peer {addr} is not a Tandem peer (it answered {bytes:02x?}); dropping it")
            });
            return Err(CallError::Refused("not a Tandem peer".into()));
        }
        Preamble::Tandem { version } if version != PROTOCOL_VERSION => {
            net.refused(addr, &format!("version {version}"), || {
                format!(
                    "Peer {addr} speaks Tandem protocol version {version}, \
                     we speak version {PROTOCOL_VERSION}"
                )
            });
            return Err(CallError::Refused(format!("protocol version {version} != {PROTOCOL_VERSION}")));
        }
        Preamble::Tandem { .. } => {}
    }
    match wire::read_frame_limited(stream, wire::MAX_HELLO_BYTES).await.map_err(CallError::unreachable)? {
        HelloReply::Accepted { member, group } => Ok((member, group)),
        HelloReply::Refused { reason } => {
            let key = super::refusals::reason_key("refused by peer", &reason);
            let line = || format!("Peer {addr} refused our connection: {reason}");
            if reason.contains(NOT_IN_ALLOWLIST) {
                // The peer's operator took this address off its list: the
                // peer says so at warning, as Galera's does; here it is
                // a note, as in Galera, whose refused side logs nothing.
                net.noted_at(log::Level::Info, addr, &key, line);
            } else {
                net.refused(addr, &key, line);
            }
            Err(CallError::Refused(reason))
        }
    }
}

/// What a refusal for the allowlist says, on both sides of the wire.
pub(crate) const NOT_IN_ALLOWLIST: &str = "is not in wsrep_allowlist";

/// What the accepting member checks a hello against.
pub struct Us<'a> {
    pub cluster: &'a str,
    pub member: MemberId,
    /// The live group we are in, if any.
    pub group: Option<[u8; 16]>,
    /// Where refusals are logged (once per peer and reason per minute).
    pub net: &'a NetCtx,
}

impl Us<'_> {
    fn refused(&self, peer: SocketAddr, kind: &str, line: String) {
        self.net.refused(&peer.ip().to_string(), kind, || line);
    }
}

/// Listener side: check who is calling. `None` means the connection must be
/// dropped (the reason has been logged).
pub async fn accept<S>(stream: &mut S, us: &Us<'_>, peer: SocketAddr) -> Option<Hello>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, accept_inner(stream, us, peer)).await {
        Ok(hello) => hello,
        Err(_) => {
            us.refused(
                peer,
                "slow handshake",
                format!(
                    "Connection from {peer} did not complete the Tandem handshake \
                     in {HANDSHAKE_TIMEOUT:?}; closing"
                ),
            );
            None
        }
    }
}

async fn accept_inner<S>(stream: &mut S, us: &Us<'_>, peer: SocketAddr) -> Option<Hello>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let version = match wire::read_preamble(stream).await {
        Ok(Preamble::Tandem { version }) => version,
        Ok(Preamble::BadMagic(bytes)) => {
            us.refused(
                peer,
                "not a Tandem peer",
                format!("Connection from {peer} is not a Tandem peer (first bytes {bytes:02x?}); closing"),
            );
            return None;
        }
        Err(e) => {
            us.refused(peer, "closed in handshake", format!("Connection from {peer} closed during the handshake: {e}"));
            return None;
        }
    };
    if version != PROTOCOL_VERSION {
        us.refused(
            peer,
            &format!("version {version}"),
            format!(
                "Connection from {peer} speaks Tandem protocol version {version}, \
                 we speak version {PROTOCOL_VERSION}; closing"
            ),
        );
        let reason = format!("protocol version {version} is not supported, this member speaks {PROTOCOL_VERSION}");
        refuse(stream, reason).await;
        return None;
    }
    let hello: Hello = match wire::read_frame_limited(stream, wire::MAX_HELLO_BYTES).await {
        Ok(h) => h,
        Err(e) => {
            us.refused(peer, "bad hello", format!("Connection from {peer} sent a bad Tandem handshake ({e}); closing"));
            return None;
        }
    };
    let cluster = us.cluster;
    if hello.cluster != cluster {
        us.refused(
            peer,
            &format!("cluster {}", hello.cluster),
            format!(
                "Refusing member {} ({}) from {peer}: it belongs to cluster '{}', \
                 this member to cluster '{cluster}'",
                hello.member, hello.info.name, hello.cluster
            ),
        );
        let reason = format!(
            "cluster name mismatch: you are in cluster '{}', this member is in cluster '{cluster}'",
            hello.cluster
        );
        refuse(stream, reason).await;
        return None;
    }
    if let (Some(theirs), Some(ours)) = (hello.group, us.group) {
        if theirs != ours {
            let (theirs, ours) = (uuid_text(&theirs), uuid_text(&ours));
            us.refused(
                peer,
                &format!("group {theirs}"),
                format!(
                    "Refusing member {} ({}) from {peer}: it is in group {theirs}, this member in \
                     group {ours} (two clusters named '{cluster}'?)",
                    hello.member, hello.info.name
                ),
            );
            let reason = format!(
                "group mismatch: you are in group {theirs}, this member is in group {ours} of cluster \
                 '{cluster}'; a node leaves its group before joining another"
            );
            refuse(stream, reason).await;
            return None;
        }
    }
    let reply = HelloReply::Accepted { member: us.member, group: us.group };
    if wire::write_preamble(stream).await.is_err() || wire::write_frame(stream, &reply).await.is_err() {
        return None;
    }
    Some(hello)
}

/// Tells a peer refused before the handshake (no encryption where we require
/// it, an address not in the allowlist) why, in the handshake it speaks, so
/// that it logs the reason too. Reads its preamble and hello first: closing
/// with them unread would reset the connection before our answer reaches it.
pub async fn refuse_peer<S>(stream: &mut S, reason: &str)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    if !matches!(wire::read_preamble(stream).await, Ok(Preamble::Tandem { .. })) {
        return; // not a Tandem peer: nothing it would understand
    }
    if wire::read_frame_limited::<_, Hello>(stream, wire::MAX_HELLO_BYTES).await.is_ok() {
        refuse(stream, reason.to_string()).await;
    }
}

/// Best effort: the peer may already be gone, and we drop it either way.
async fn refuse<S: AsyncWrite + Unpin>(stream: &mut S, reason: String) {
    if wire::write_preamble(stream).await.is_ok() {
        let _ = wire::write_frame(stream, &HelloReply::Refused { reason }).await;
    }
}

/// A uuid as Galera prints it.
pub(crate) fn uuid_text(u: &[u8; 16]) -> String {
    let h: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}
