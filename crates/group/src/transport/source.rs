//! Where this member's outgoing connections come from.
//!
//! A member that listens on one address of a host with several (as
//! `gmcast.listen_addr=127.0.0.3`, or a node address on one of two
//! interfaces) dials from that same address, as Galera's members do. The
//! kernel would otherwise pick the source by the route, and a peer's
//! `wsrep_allowlist` would judge a member by an address the operator never
//! named: a member taken off the list would still get through.

use std::io;
use std::net::{IpAddr, SocketAddr};

use log::debug;
use tokio::net::{TcpSocket, TcpStream};

/// The address outgoing connections leave from: the listen address's, when
/// it names one (not `0.0.0.0` or `::`, and not a host name).
pub(super) fn source_ip(listen_addr: &str) -> Option<IpAddr> {
    let ip = listen_addr.parse::<SocketAddr>().ok()?.ip();
    (!ip.is_unspecified()).then_some(ip)
}

/// Connects to `addr`, from `source` when given. A peer address of the
/// other IP family, or a source the host no longer has, connects as the
/// kernel routes it, rather than not at all.
pub(super) async fn connect(addr: &str, source: Option<IpAddr>) -> io::Result<TcpStream> {
    let Some(source) = source else {
        return TcpStream::connect(addr).await;
    };
    let mut last = None;
    for target in tokio::net::lookup_host(addr).await?.filter(|t| t.is_ipv4() == source.is_ipv4()) {
        let socket = if target.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
        if let Err(e) = socket.bind(SocketAddr::new(source, 0)) {
            debug!("Cannot dial {addr} from {source}: {e}; dialling from the routed address");
            return TcpStream::connect(addr).await;
        }
        match socket.connect(target).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    match last {
        Some(e) => Err(e),
        None => TcpStream::connect(addr).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_named_address_is_a_source() {
        assert_eq!(source_ip("127.0.0.3:4567"), Some("127.0.0.3".parse().unwrap()));
        assert_eq!(source_ip("[::1]:4567"), Some("::1".parse().unwrap()));
        assert_eq!(source_ip("0.0.0.0:4567"), None);
        assert_eq!(source_ip("[::]:4567"), None);
        assert_eq!(source_ip("db1.example:4567"), None, "a host name is the route's business");
    }

    #[tokio::test]
    async fn a_connection_leaves_from_the_listen_address() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let _stream = connect(&addr, source_ip("127.0.0.3:0")).await.unwrap();
        let (_, from) = listener.accept().unwrap();
        assert_eq!(from.ip().to_string(), "127.0.0.3");
        let _routed = connect(&addr, None).await.unwrap();
        let (_, from) = listener.accept().unwrap();
        assert_eq!(from.ip().to_string(), "127.0.0.1", "unbound, the route picks loopback's own");
    }
}
