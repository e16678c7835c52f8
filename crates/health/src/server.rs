//! The listeners: one for HTTP (health and metrics), one for HAProxy's
//! agent check. Plain threads and blocking sockets: a check is a few hundred
//! bytes a second, and this stays out of the group's runtime.
//!
//! Limits, so that a peer's mistake or malice costs the node nothing lasting:
//! a connection gets [`DEADLINE`] to send its request head, at most
//! [`MAX_CONNECTIONS`] are served at once (more are closed at once), and
//! every thread is joined by [`Listeners::stop`], which the provider calls
//! from `free()`.
//!
//! An accept loop blocks in `accept` until a peer connects: an idle node's
//! listeners cost no wake-ups (a loop that polled a non-blocking socket
//! woke 10 times a second each, and Linux sets up a socket for every
//! `accept` it then answers with "would block"). `stop` wakes them by
//! shutting the listening sockets down, which on Linux makes a blocked
//! `accept` fail at once.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::http::{self, Head, Request, Response};

/// How long a peer has to send its request head.
pub const DEADLINE: Duration = Duration::from_secs(2);
/// Connections served at once, per listener.
pub const MAX_CONNECTIONS: usize = 16;
/// How long an accept loop pauses after `accept` failed (too many open
/// files, say) before it tries again.
const RETRY: Duration = Duration::from_millis(100);
/// At most one log line per this period about peers that misbehave.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// What the listeners answer; the provider implements it over the node.
pub trait Service: Send + Sync + 'static {
    fn http(&self, request: &Request) -> Response;
    /// The agent check's line (see [`crate::policy::Agent::line`]).
    fn agent_line(&self) -> String;
}

/// The running listeners.
pub struct Listeners {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// The listening sockets, shut down by `stop` to wake their loops.
    sockets: Vec<TcpListener>,
    pub http_addr: Option<SocketAddr>,
    pub agent_addr: Option<SocketAddr>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Http,
    Agent,
}

/// Binds each address given (`host:port`; empty: none) and serves it. An
/// address that cannot be bound is an error naming the option, so the
/// operator learns it at startup rather than from a proxy that never sees
/// the node.
pub fn start(http: (&str, &str), agent: (&str, &str), service: Arc<dyn Service>) -> Result<Listeners, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut listeners =
        Listeners { stop: stop.clone(), threads: vec![], sockets: vec![], http_addr: None, agent_addr: None };
    for ((option, address), kind) in [(http, Kind::Http), (agent, Kind::Agent)] {
        if address.trim().is_empty() {
            continue;
        }
        let listener = bind(option, address.trim())?;
        let local = listener.local_addr().map_err(|e| format!("{option}={address}: {e}"))?;
        listeners.sockets.push(listener.try_clone().map_err(|e| format!("{option}={address}: {e}"))?);
        let service = service.clone();
        let stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("tandem-{}", if kind == Kind::Http { "health" } else { "agent" }))
            .spawn(move || accept_loop(listener, kind, service, stop))
            .map_err(|e| format!("{option}={address}: cannot start its thread: {e}"))?;
        listeners.threads.push(thread);
        match kind {
            Kind::Http => listeners.http_addr = Some(local),
            Kind::Agent => listeners.agent_addr = Some(local),
        }
        log::info!("{option}: listening on {local}");
    }
    Ok(listeners)
}

fn bind(option: &str, address: &str) -> Result<TcpListener, String> {
    let listener = TcpListener::bind(address).map_err(|e| {
        let hint = if e.kind() == ErrorKind::AddrInUse { ": the port is taken; choose another one" } else { "" };
        format!("{option}={address}: cannot listen: {e}{hint}")
    })?;
    Ok(listener)
}

impl Listeners {
    /// Stops accepting, waits for the connections being served (each ends
    /// within [`DEADLINE`]) and joins every thread.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for socket in self.sockets.drain(..) {
            wake(&socket);
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for Listeners {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Wakes the accept loop blocked on `socket` (it then sees the stop flag).
/// Should the shutdown fail, a connection of our own wakes it instead.
fn wake(socket: &TcpListener) {
    if socket2::SockRef::from(socket).shutdown(Shutdown::Read).is_err() {
        connect_to(socket);
    }
}

/// Connects to `socket` (to its loopback address where it listens on all).
fn connect_to(socket: &TcpListener) {
    if let Ok(mut addr) = socket.local_addr() {
        if addr.ip().is_unspecified() {
            let loopback: std::net::IpAddr = if addr.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            };
            addr.set_ip(loopback);
        }
        let _ = TcpStream::connect_timeout(&addr, Duration::from_secs(1));
    }
}

fn accept_loop(listener: TcpListener, kind: Kind, service: Arc<dyn Service>, stop: Arc<AtomicBool>) {
    let active = Arc::new(AtomicUsize::new(0));
    let complaints = Arc::new(Complaints::default());
    let mut served: Vec<JoinHandle<()>> = vec![];
    while !stop.load(Ordering::Acquire) {
        served.retain(|t| !t.is_finished());
        let (stream, peer) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) if stop.load(Ordering::Acquire) => break,
            Err(e) => {
                complaints.note(&format!("accept failed: {e}"));
                std::thread::sleep(RETRY);
                continue;
            }
        };
        if stop.load(Ordering::Acquire) {
            break; // `wake`'s own connection, or a peer's just as we stop
        }
        if active.load(Ordering::Acquire) >= MAX_CONNECTIONS {
            complaints.note(&format!("{peer}: refused, {MAX_CONNECTIONS} connections are already being served"));
            drop(stream);
            continue;
        }
        active.fetch_add(1, Ordering::AcqRel);
        let (service, done, complaint) = (service.clone(), active.clone(), complaints.clone());
        let spawned = std::thread::Builder::new().name("tandem-check".into()).spawn(move || {
            let outcome = match kind {
                Kind::Http => serve_http(stream, &*service),
                Kind::Agent => serve_agent(stream, &*service),
            };
            if let Err(why) = outcome {
                complaint.note(&format!("{peer}: {why}"));
            }
            done.fetch_sub(1, Ordering::AcqRel);
        });
        match spawned {
            Ok(thread) => served.push(thread),
            Err(e) => {
                active.fetch_sub(1, Ordering::AcqRel);
                complaints.note(&format!("cannot start a thread for {peer}: {e}"));
            }
        }
    }
    for thread in served {
        let _ = thread.join();
    }
}

fn serve_http(mut stream: TcpStream, service: &dyn Service) -> Result<(), String> {
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(DEADLINE));
    let deadline = Instant::now() + DEADLINE;
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    let request = loop {
        match http::parse(&buf) {
            Head::Complete(request) => break request,
            Head::Bad(why) => {
                let _ = stream.write_all(&Response::text(400, format!("{why}\r\n")).encode(false));
                return Err(format!("bad request: {why}"));
            }
            Head::Partial => {}
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("no complete request within {}s ({} bytes)", DEADLINE.as_secs(), buf.len()));
        }
        stream.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
        match stream.read(&mut chunk) {
            Ok(0) if buf.is_empty() => return Ok(()), // a TCP check: connect, close
            Ok(0) => return Err(format!("closed after {} bytes of a request", buf.len())),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(e) => return Err(e.to_string()),
        }
    };
    let response = service.http(&request);
    stream.write_all(&response.encode(request.method == "HEAD")).map_err(|e| e.to_string())?;
    let _ = stream.shutdown(Shutdown::Write);
    Ok(())
}

/// HAProxy connects, may send its `agent-send` string, and reads one line.
fn serve_agent(mut stream: TcpStream, service: &dyn Service) -> Result<(), String> {
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    let _ = stream.set_write_timeout(Some(DEADLINE));
    stream.write_all(service.agent_line().as_bytes()).map_err(|e| e.to_string())?;
    let _ = stream.shutdown(Shutdown::Write);
    // Read what the peer sent before closing: closing a socket with unread
    // bytes sends a reset, which may reach the peer before our line does.
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut sink = [0u8; 512];
    let deadline = Instant::now() + Duration::from_millis(200);
    while Instant::now() < deadline {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    Ok(())
}

/// Misbehaving peers are logged, at most one line per [`LOG_EVERY`], with
/// the count of those not logged since.
#[derive(Default)]
struct Complaints {
    last: Mutex<Option<(Instant, u64)>>,
}

impl Complaints {
    fn note(&self, what: &str) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        match *last {
            Some((at, skipped)) if now.duration_since(at) < LOG_EVERY => *last = Some((at, skipped + 1)),
            Some((_, skipped)) => {
                log::info!(
                    "Health endpoint: {what} ({skipped} more like it not logged in the last {}s)",
                    LOG_EVERY.as_secs()
                );
                *last = Some((now, 0));
            }
            None => {
                log::info!("Health endpoint: {what}");
                *last = Some((now, 0));
            }
        }
    }
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
