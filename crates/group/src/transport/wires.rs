//! Where a member's connections come from: the operating system's TCP, or
//! a network given in [`crate::GroupConfig::wires`]. A simulation gives
//! one whose links it can delay, drop and cut, and whose time it steps
//! (docs/simulation.md); production never sets it.
//!
//! A given network carries plaintext only: TLS is a property of the TCP
//! path (it peeks at the socket to tell a ClientHello from a preamble),
//! and `start` refuses the two together rather than ignore one.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One connection of a given network.
pub trait Link: AsyncRead + AsyncWrite + Send + Unpin + 'static {
    /// Nothing to read and not closed: an idle connection still in step
    /// (a pooled connection is reused only then).
    fn is_idle(&mut self) -> bool;
}

/// A listener of a given network.
pub trait Listener: Send + 'static {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(Box<dyn Link>, SocketAddr)>>;
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

/// A network other than the operating system's.
pub trait Network: Send + Sync + 'static {
    fn connect(&self, addr: &str) -> BoxFuture<'static, io::Result<Box<dyn Link>>>;
    fn listen(&self, addr: &str) -> BoxFuture<'static, io::Result<Box<dyn Listener>>>;
}

/// [`crate::GroupConfig::wires`]: a given network, shared by the members
/// that run on it.
#[derive(Clone)]
pub struct Wires(pub Arc<dyn Network>);

impl fmt::Debug for Wires {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Wires(a given network)")
    }
}

/// The group listener: TCP, or a given network's.
pub enum GroupListener {
    Tcp(tokio::net::TcpListener),
    Given(Box<dyn Listener>),
}

/// An accepted connection, before any handshake.
pub enum Accepted {
    Tcp(tokio::net::TcpStream),
    Given(Box<dyn Link>),
}

impl GroupListener {
    pub async fn accept(&mut self) -> io::Result<(Accepted, SocketAddr)> {
        match self {
            GroupListener::Tcp(l) => l.accept().await.map(|(s, peer)| (Accepted::Tcp(s), peer)),
            GroupListener::Given(l) => l.accept().await.map(|(s, peer)| (Accepted::Given(s), peer)),
        }
    }
}
