use super::*;
use std::io::{Read, Write};
use std::net::TcpStream;

struct Fixed;

impl Service for Fixed {
    fn http(&self, request: &Request) -> Response {
        match request.path.as_str() {
            "/" => Response::text(503, "Joined\r\n"),
            _ => Response::text(404, "no\r\n"),
        }
    }
    fn agent_line(&self) -> String {
        "up ready 42%\n".into()
    }
}

fn started() -> Listeners {
    start(("health.address", "127.0.0.1:0"), ("health.agent_address", "127.0.0.1:0"), Arc::new(Fixed)).unwrap()
}

fn exchange(addr: SocketAddr, send: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(send).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn answers_http_and_the_agent_check() {
    let mut l = started();
    let http = l.http_addr.unwrap();
    let reply = exchange(http, b"GET / HTTP/1.0\r\n\r\n");
    assert!(
        reply.starts_with("HTTP/1.1 503 Service Unavailable\r\n") && reply.ends_with("\r\n\r\nJoined\r\n"),
        "{reply}"
    );
    assert!(exchange(http, b"GET /nothing HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 "));
    // HAProxy may send an agent-send string first, or nothing.
    assert_eq!(exchange(l.agent_addr.unwrap(), b"be/srv1\n"), "up ready 42%\n");
    assert_eq!(exchange(l.agent_addr.unwrap(), b""), "up ready 42%\n");
    l.stop();
}

#[test]
fn garbage_gets_a_400_and_the_next_check_still_works() {
    let mut l = started();
    let http = l.http_addr.unwrap();
    let mut garbage = vec![0x16, 0x03, 0x01];
    garbage.extend((0..300u32).map(|i| (i * 7919 % 251) as u8));
    garbage.extend_from_slice(b"\r\n\r\n");
    assert!(exchange(http, &garbage).starts_with("HTTP/1.1 400 "));
    assert!(exchange(http, &vec![b'A'; 20_000]).starts_with("HTTP/1.1 400 "));
    assert!(exchange(http, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 503 "));
    l.stop();
}

#[test]
fn a_slow_peer_is_cut_off_at_the_deadline_without_blocking_others() {
    let mut l = started();
    let http = l.http_addr.unwrap();
    let mut slow = TcpStream::connect(http).unwrap();
    slow.write_all(b"GET / HT").unwrap();
    // Others are served meanwhile.
    assert!(exchange(http, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 503 "));
    slow.set_read_timeout(Some(DEADLINE * 5)).unwrap();
    let mut rest = vec![];
    let read = slow.read_to_end(&mut rest);
    assert!(read.is_ok() && rest.is_empty(), "{read:?} {rest:?}");
    l.stop();
}

#[test]
fn more_peers_than_the_limit_are_closed_and_the_threads_end() {
    let mut l = started();
    let http = l.http_addr.unwrap();
    let idle: Vec<TcpStream> = (0..MAX_CONNECTIONS + 8).map(|_| TcpStream::connect(http).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    drop(idle);
    // Served again once the idle ones are gone.
    let answered = (0..50).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        exchange(http, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 503 ")
    });
    assert!(answered);
    // Returns only once every thread is joined (a hang fails the test run).
    l.stop();
    assert!(TcpStream::connect(http).is_err() || exchange(http, b"GET / HTTP/1.1\r\n\r\n").is_empty());
}

#[test]
fn a_taken_port_is_an_error_that_names_the_option() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let err = start(("health.address", &addr), ("health.agent_address", ""), Arc::new(Fixed)).err().unwrap();
    assert!(err.starts_with(&format!("health.address={addr}: cannot listen")), "{err}");
    assert!(err.contains("the port is taken"), "{err}");
    let bad = start(("health.address", "not an address"), ("", ""), Arc::new(Fixed)).err().unwrap();
    assert!(bad.starts_with("health.address=not an address: cannot listen"), "{bad}");
}

#[test]
fn nothing_to_listen_on_starts_nothing() {
    let mut l = start(("health.address", ""), ("health.agent_address", " "), Arc::new(Fixed)).unwrap();
    assert!(l.http_addr.is_none() && l.agent_addr.is_none() && l.threads.is_empty());
    l.stop();
}

/// Runs `stop_it` on listeners bound to every address, idle, and fails
/// (rather than hangs) if their threads do not end.
fn ends_when_woken(stop_it: fn(&mut Listeners)) {
    let (done, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut l =
            start(("health.address", "0.0.0.0:0"), ("health.agent_address", "127.0.0.1:0"), Arc::new(Fixed)).unwrap();
        std::thread::sleep(Duration::from_millis(50)); // both loops blocked in accept
        stop_it(&mut l);
        done.send(()).unwrap();
    });
    // A hang guard, not a measure: stopping takes microseconds.
    assert!(ended.recv_timeout(Duration::from_secs(60)).is_ok(), "an idle accept loop was never woken");
}

#[test]
fn idle_listeners_stop_when_their_sockets_are_shut() {
    ends_when_woken(|l| l.stop());
}

#[test]
fn a_connection_of_our_own_wakes_an_idle_listener_too() {
    ends_when_woken(|l| {
        l.stop.store(true, Ordering::Release);
        for socket in l.sockets.drain(..) {
            connect_to(&socket);
        }
        l.stop();
    });
}
