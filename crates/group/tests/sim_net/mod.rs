//! The group's network in the simulation: turmoil's simulated TCP behind
//! the group's `wires::Network` (docs/simulation.md). Every connection the
//! production transport makes or accepts goes through turmoil, which
//! delays, drops and partitions it as the test and the seed say.

use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tandem_group::wires::{BoxFuture, Link, Listener, Network};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub struct SimNet;

thread_local! {
    static CRASHING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `crash` (a `Sim::crash` of a host) as a power cut: the host's
/// connections vanish without a FIN or a RST, and their peers find out by
/// their own timeouts. Otherwise the crash would close them in the order
/// tokio drops the host's tasks, which follows task ids that count across
/// the process, so a seed would not replay after another run.
pub fn power_cut<R>(crash: impl FnOnce() -> R) -> R {
    CRASHING.with(|c| c.set(true));
    let done = crash();
    CRASHING.with(|c| c.set(false));
    done
}

impl Network for SimNet {
    fn connect(&self, addr: &str) -> BoxFuture<'static, io::Result<Box<dyn Link>>> {
        let addr = addr.to_string();
        Box::pin(async move {
            let stream = turmoil::net::TcpStream::connect(addr.as_str()).await?;
            Ok(Box::new(SimLink(Some(stream))) as Box<dyn Link>)
        })
    }

    fn listen(&self, addr: &str) -> BoxFuture<'static, io::Result<Box<dyn Listener>>> {
        let addr = addr.to_string();
        Box::pin(async move {
            let listener = turmoil::net::TcpListener::bind(addr.as_str()).await?;
            Ok(Box::new(SimListener(listener)) as Box<dyn Listener>)
        })
    }
}

struct SimListener(turmoil::net::TcpListener);

impl Listener for SimListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(Box<dyn Link>, SocketAddr)>> {
        Box::pin(async move {
            let (stream, peer) = self.0.accept().await?;
            Ok((Box::new(SimLink(Some(stream))) as Box<dyn Link>, peer))
        })
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// A connection; `None` only while it is dropped.
struct SimLink(Option<turmoil::net::TcpStream>);

impl SimLink {
    fn tcp(&mut self) -> &mut turmoil::net::TcpStream {
        self.0.as_mut().expect("a live connection")
    }
}

impl Drop for SimLink {
    fn drop(&mut self) {
        if CRASHING.with(Cell::get) {
            std::mem::forget(self.0.take());
        }
    }
}

impl Link for SimLink {
    fn is_idle(&mut self) -> bool {
        let mut probe = [0u8; 1];
        let mut buf = ReadBuf::new(&mut probe);
        let mut cx = Context::from_waker(Waker::noop());
        matches!(self.tcp().poll_peek(&mut cx, &mut buf), Poll::Pending)
    }
}

impl AsyncRead for SimLink {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(self.get_mut().tcp()).poll_read(cx, buf)
    }
}

impl AsyncWrite for SimLink {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(self.get_mut().tcp()).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(self.get_mut().tcp()).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(self.get_mut().tcp()).poll_shutdown(cx)
    }
}
