//! One connection between donor and joiner: TCP, or TLS over it with the
//! group's identity (both ends present a certificate from the same CA).

use super::settings::TlsSource;
use anyhow::{anyhow, bail, Result};
use rustls::pki_types::ServerName;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tandem_group::{Tls, TlsFiles, TlsPolicy};

pub enum Conn {
    Plain(TcpStream),
    Client(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
    Server(Box<rustls::StreamOwned<rustls::ServerConnection, TcpStream>>),
}

impl Conn {
    fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Client(s) => &s.sock,
            Conn::Server(s) => &s.sock,
        }
    }

    pub fn set_timeout(&self, t: Duration) -> io::Result<()> {
        self.tcp().set_read_timeout(Some(t))?;
        self.tcp().set_write_timeout(Some(t))
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Client(s) => s.read(buf),
            Conn::Server(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Client(s) => s.write(buf),
            Conn::Server(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Client(s) => s.flush(),
            Conn::Server(s) => s.flush(),
        }
    }
}

/// The loaded identity, or none for a plaintext transfer.
pub struct Security(Option<Arc<Tls>>);

impl Security {
    pub fn load(source: Option<&TlsSource>) -> Result<Security> {
        let Some(s) = source else { return Ok(Security(None)) };
        let files = TlsFiles { cert: s.cert.clone(), key: s.key.clone(), ca: s.ca.clone() };
        let policy = TlsPolicy { ciphers: s.ciphers.clone(), ..TlsPolicy::default() };
        let tls = Tls::load_with(&files, &policy)
            .map_err(|e| anyhow!("TLS for the state transfer (from {}): {e}", s.from))?;
        Ok(Security(Some(Arc::new(tls))))
    }

    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// The donor's side: dial `addr`, retrying a refused connection until
    /// `within` (the joiner listens before it says `ready`, but a proxy or a
    /// slow loopback may still refuse the very first try).
    pub fn connect(&self, addr: &str, within: Duration) -> Result<Conn> {
        let deadline = Instant::now() + within;
        let target = addr.to_socket_addrs()?.next().ok_or_else(|| anyhow!("{addr}: no address"))?;
        let tcp = loop {
            match TcpStream::connect_timeout(&target, Duration::from_secs(5)) {
                Ok(s) => break s,
                Err(e) if Instant::now() < deadline => {
                    log::debug!("connecting to {addr}: {e}; again");
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => bail!("cannot connect to the joiner at {addr}: {e}"),
            }
        };
        tcp.set_nodelay(true)?;
        let Some(tls) = &self.0 else { return Ok(Conn::Plain(tcp)) };
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).trim_matches(['[', ']']);
        let name = ServerName::try_from(host.to_string()).map_err(|e| anyhow!("{addr}: {e}"))?;
        let conn = rustls::ClientConnection::new(tls.client_config(), name)?;
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        // Complete the handshake now, so a refused certificate is an error
        // here, with its reason, and not a broken pipe later.
        while stream.conn.is_handshaking() {
            stream
                .conn
                .complete_io(&mut stream.sock)
                .map_err(|e| anyhow!("TLS handshake with the joiner at {addr}: {e}"))?;
        }
        Ok(Conn::Client(Box::new(stream)))
    }

    /// The joiner's side of one accepted connection.
    pub fn accept(&self, tcp: TcpStream) -> Result<Conn> {
        tcp.set_nodelay(true)?;
        let Some(tls) = &self.0 else { return Ok(Conn::Plain(tcp)) };
        let conn = rustls::ServerConnection::new(tls.server_config())?;
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock).map_err(|e| anyhow!("TLS handshake with the donor: {e}"))?;
        }
        Ok(Conn::Server(Box::new(stream)))
    }
}

/// Binds the joiner's listener, with the error a DBA can act on.
pub fn listen(addr: &str) -> Result<TcpListener> {
    TcpListener::bind(addr).map_err(|e| {
        anyhow!("cannot listen for the state transfer on {addr}: {e} (wsrep_sst_receive_address names the address)")
    })
}
