use super::*;

fn complete(method: &str, path: &str) -> Head {
    Head::Complete(Request { method: method.into(), path: path.into() })
}

#[test]
fn reads_what_checkers_send() {
    // HAProxy's `option httpchk` default, curl, Prometheus, a hand-typed one.
    assert_eq!(parse(b"OPTIONS / HTTP/1.0\r\n\r\n"), complete("OPTIONS", "/"));
    assert_eq!(parse(b"GET /health HTTP/1.1\r\nHost: x\r\nUser-Agent: curl/7.88\r\n\r\n"), complete("GET", "/health"));
    assert_eq!(parse(b"GET /metrics?x=1 HTTP/1.1\r\nAccept: text/plain\r\n\r\n"), complete("GET", "/metrics"));
    assert_eq!(parse(b"HEAD / HTTP/1.1\n\n"), complete("HEAD", "/"));
}

#[test]
fn waits_for_the_whole_head_and_bounds_it() {
    assert_eq!(parse(b""), Head::Partial);
    assert_eq!(parse(b"GET / HTTP/1.1\r\nHost: x\r\n"), Head::Partial);
    let long = vec![b'a'; MAX_HEAD];
    assert!(matches!(parse(&long), Head::Bad(why) if why.contains("longer than")));
}

#[test]
fn refuses_what_is_not_an_http_request() {
    for bad in [
        &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"[..],
        b"GET /\r\n\r\n",
        b"GET / HTTP/2.0\r\n\r\n",
        b"get / HTTP/1.1\r\n\r\n",
        b"GET health HTTP/1.1\r\n\r\n",
        b"GET  / HTTP/1.1\r\n\r\n",
        b"\r\n\r\n",
    ] {
        assert!(matches!(parse(bad), Head::Bad(_)), "{:?}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn a_peers_bytes_are_logged_escaped_and_short() {
    assert_eq!(printable("a\u{1b}b\n"), "a\\u{1b}b\\n");
    let long = "x".repeat(200);
    assert_eq!(printable(&long).len(), 83);
}

#[test]
fn responses_carry_their_length_and_close() {
    let r = Response::text(503, "Tandem node is not available: Joined\r\n");
    let wire = String::from_utf8(r.encode(false)).unwrap();
    assert!(wire.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{wire}");
    assert!(wire.contains("Content-Length: 38\r\n"), "{wire}");
    assert!(wire.contains("Connection: close\r\n"), "{wire}");
    assert!(wire.ends_with("\r\n\r\nTandem node is not available: Joined\r\n"), "{wire}");
    let head = String::from_utf8(r.encode(true)).unwrap();
    assert!(head.ends_with("Connection: close\r\n\r\n"), "{head}");
    assert!(head.contains("Content-Length: 38\r\n"), "{head}");
}
