//! The group's network in the simulation: turmoil's simulated TCP behind
//! the group's `wires::Network` (docs/simulation.md). Every connection the
//! production transport makes or accepts goes through turmoil, which
//! delays, drops and partitions it as the test and the seed say.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tandem_group::wires::{BoxFuture, Link, Listener, Network};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub struct SimNet;

impl Network for SimNet {
    fn connect(&self, addr: &str) -> BoxFuture<'static, io::Result<Box<dyn Link>>> {
        let addr = addr.to_string();
        Box::pin(async move {
            let stream = turmoil::net::TcpStream::connect(addr.as_str()).await?;
            Ok(Box::new(SimLink(stream)) as Box<dyn Link>)
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
            Ok((Box::new(SimLink(stream)) as Box<dyn Link>, peer))
        })
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

struct SimLink(turmoil::net::TcpStream);

impl Link for SimLink {
    fn is_idle(&mut self) -> bool {
        let mut probe = [0u8; 1];
        let mut buf = ReadBuf::new(&mut probe);
        let mut cx = Context::from_waker(Waker::noop());
        matches!(self.0.poll_peek(&mut cx, &mut buf), Poll::Pending)
    }
}

impl AsyncRead for SimLink {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for SimLink {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}
