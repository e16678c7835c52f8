//! The part of HTTP/1.x that health checkers and Prometheus speak: a request
//! line and headers in, one response with a body out, then close.
//!
//! Anything else is answered 400 and closed. The head is bounded
//! ([`MAX_HEAD`]) so a peer cannot make the node buffer without end.

/// Longest request head accepted (request line and headers).
pub const MAX_HEAD: usize = 8 * 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path without its query string.
    pub path: String,
}

/// Where a request head stands after the bytes read so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Head {
    /// Not complete yet: read more.
    Partial,
    Complete(Request),
    Bad(String),
}

/// Reads a request head from the bytes received so far.
pub fn parse(buf: &[u8]) -> Head {
    let Some(end) = head_end(buf) else {
        return if buf.len() >= MAX_HEAD {
            Head::Bad(format!("request head longer than {MAX_HEAD} bytes"))
        } else {
            Head::Partial
        };
    };
    let Ok(head) = std::str::from_utf8(&buf[..end]) else { return Head::Bad("request head is not text".into()) };
    let line = head.lines().next().unwrap_or("");
    let mut words = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (words.next(), words.next(), words.next(), words.next())
    else {
        return Head::Bad(format!("malformed request line '{}'", printable(line)));
    };
    if !version.starts_with("HTTP/1.") {
        return Head::Bad(format!("unsupported protocol '{}'", printable(version)));
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) || !target.starts_with('/') {
        return Head::Bad(format!("malformed request line '{}'", printable(line)));
    }
    let path = target.split('?').next().unwrap_or(target).to_string();
    Head::Complete(Request { method: method.to_string(), path })
}

/// The end of the head: the first blank line. Bare `\n` line ends are
/// accepted too (hand-typed requests, old checkers).
fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = buf.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A peer's bytes as they may appear in a log line: at most 80 characters,
/// control characters escaped.
pub fn printable(s: &str) -> String {
    let mut out: String = s.chars().take(80).flat_map(char::escape_default).collect();
    if s.chars().count() > 80 {
        out.push_str("...");
    }
    out
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Response {
    pub fn text(status: u16, body: impl Into<String>) -> Response {
        Response { status, content_type: "text/plain; charset=utf-8", body: body.into() }
    }

    /// The bytes on the wire; `head_only` for `HEAD` requests.
    pub fn encode(&self, head_only: bool) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        )
        .into_bytes();
        if !head_only {
            out.extend_from_slice(self.body.as_bytes());
        }
        out
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
