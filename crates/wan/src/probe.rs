//! Measuring a path: a UDP echo on one end, and a prober on the other that
//! sends numbered datagrams at a steady pace and reports the round trips,
//! the loss and the reordering it saw. The emulator's own tests use it, and
//! a user checks with it that a layout behaves as asked.

use std::collections::BTreeSet;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};

/// Answers every datagram with itself, until the process is stopped.
pub fn echo(listen: SocketAddr) -> Result<()> {
    serve_echo(&UdpSocket::bind(listen).with_context(|| format!("cannot listen on {listen}"))?)
}

/// `echo` on a socket already bound.
pub fn serve_echo(socket: &UdpSocket) -> Result<()> {
    let mut buf = vec![0u8; 65536];
    loop {
        let (n, from) = socket.recv_from(&mut buf).context("receiving")?;
        // A reply that cannot go (the path cut, say) is a lost probe.
        let _ = socket.send_to(&buf[..n], from);
    }
}

/// How to probe.
#[derive(Clone, Debug)]
pub struct ProbeSettings {
    pub to: SocketAddr,
    pub count: u64,
    pub interval: Duration,
    /// Bytes per datagram (16 at least: the number and the send time).
    pub size: usize,
    /// How long to wait for answers after the last send.
    pub linger: Duration,
}

/// What came back.
#[derive(Clone, Debug, PartialEq)]
pub struct Tally {
    pub sent: u64,
    /// Round trips, in the order the answers came.
    pub rtts: Vec<Duration>,
    /// Answers that came after one to a later datagram.
    pub reordered: u64,
    /// From the first answer counted to the last: over a capped link, the
    /// answers' spacing is the wire's, so their rate is the link's rate.
    pub span: Duration,
}

/// One answer: the datagram's number, when it was sent and when its echo
/// came back (both since the probe began).
#[derive(Clone, Copy, Debug)]
pub struct Answer {
    pub number: u64,
    pub sent: Duration,
    pub came: Duration,
}

impl Tally {
    /// From the answers as they came. Duplicates and numbers never sent
    /// are ignored.
    pub fn from_answers(sent: u64, answers: &[Answer]) -> Tally {
        let mut seen = BTreeSet::new();
        let mut highest = None;
        let mut rtts = Vec::new();
        let mut reordered = 0;
        let mut came = None;
        for a in answers {
            if a.number >= sent || !seen.insert(a.number) {
                continue;
            }
            if highest.is_some_and(|h| a.number < h) {
                reordered += 1;
            }
            highest = highest.max(Some(a.number));
            rtts.push(a.came.saturating_sub(a.sent));
            let (first, _) = came.unwrap_or((a.came, a.came));
            came = Some((first, a.came));
        }
        let span = came.map_or(Duration::ZERO, |(first, last)| last.saturating_sub(first));
        Tally { sent, rtts, reordered, span }
    }

    pub fn received(&self) -> u64 {
        self.rtts.len() as u64
    }

    /// The share of datagrams (or their answers) lost, 0 to 1.
    pub fn loss(&self) -> f64 {
        if self.sent == 0 {
            return 0.0;
        }
        1.0 - self.received() as f64 / self.sent as f64
    }

    /// The round trip below which `p` (0 to 1) of the answers came.
    pub fn percentile(&self, p: f64) -> Option<Duration> {
        let mut sorted = self.rtts.clone();
        sorted.sort();
        let last = sorted.len().checked_sub(1)?;
        Some(sorted[((last as f64) * p).round() as usize])
    }

    /// One line, for people and for the tests that read it:
    /// `sent=N received=N loss_pct=X reordered=N rtt_min_ms=X rtt_p50_ms=X rtt_p95_ms=X rtt_max_ms=X
    /// span_ms=X`.
    pub fn line(&self) -> String {
        let ms = |p: f64| self.percentile(p).map_or("-".to_string(), |d| format!("{:.3}", d.as_secs_f64() * 1e3));
        format!(
            "sent={} received={} loss_pct={:.2} reordered={} rtt_min_ms={} rtt_p50_ms={} rtt_p95_ms={} rtt_max_ms={} \
             span_ms={:.3}",
            self.sent,
            self.received(),
            self.loss() * 100.0,
            self.reordered,
            ms(0.0),
            ms(0.5),
            ms(0.95),
            ms(1.0),
            self.span.as_secs_f64() * 1e3
        )
    }
}

/// Sends `count` datagrams to an echo, one every `interval`, and tallies the answers.
pub fn probe(settings: &ProbeSettings) -> Result<Tally> {
    ensure!(settings.size >= 16, "a probe is 16 bytes at least (its number and send time)");
    let bind: SocketAddr = if settings.to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse()?;
    let socket = UdpSocket::bind(bind).context("cannot open a UDP socket")?;
    socket.connect(settings.to).with_context(|| format!("cannot reach {}", settings.to))?;
    socket.set_read_timeout(Some(Duration::from_millis(20)))?;
    let start = Instant::now();
    let done = Arc::new(AtomicBool::new(false));
    let listener = {
        let socket = socket.try_clone()?;
        let done = done.clone();
        std::thread::spawn(move || listen(&socket, start, &done))
    };
    let mut datagram = vec![0u8; settings.size];
    for number in 0..settings.count {
        let due = start + settings.interval * u32::try_from(number).unwrap_or(u32::MAX);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        datagram[..8].copy_from_slice(&number.to_le_bytes());
        datagram[8..16].copy_from_slice(&nanos_since(start).to_le_bytes());
        // A refused send (no route while a link is down) is a lost probe.
        let _ = socket.send(&datagram);
    }
    std::thread::sleep(settings.linger);
    done.store(true, Ordering::Relaxed);
    let answers = listener.join().map_err(|_| anyhow::anyhow!("the probe's listener panicked"))?;
    Ok(Tally::from_answers(settings.count, &answers))
}

fn listen(socket: &UdpSocket, start: Instant, done: &AtomicBool) -> Vec<Answer> {
    let mut answers = Vec::new();
    let mut buf = vec![0u8; 65536];
    while !done.load(Ordering::Relaxed) {
        let Ok(n) = socket.recv(&mut buf) else { continue };
        let now = nanos_since(start);
        if n < 16 {
            continue;
        }
        let number = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
        let sent = u64::from_le_bytes(buf[8..16].try_into().expect("8 bytes"));
        answers.push(Answer { number, sent: Duration::from_nanos(sent), came: Duration::from_nanos(now) });
    }
    answers
}

fn nanos_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_tally_counts_loss_reordering_and_duplicates() {
        // (number, sent, came) in ms, in the order they came, as a probe sees them.
        let answers = [(0, 0, 10), (9, 9, 12), (2, 2, 14), (4, 4, 15), (1, 1, 31), (2, 2, 40)]
            .map(|(number, sent, came)| Answer { number, sent: ms(sent), came: ms(came) });
        let t = Tally::from_answers(5, &answers);
        assert_eq!(t.received(), 4, "the duplicate of 2 and the unsent 9 are ignored");
        assert_eq!(t.reordered, 1, "1 came after 2 and 4");
        assert!((t.loss() - 0.2).abs() < 1e-9, "3 never came back");
        assert_eq!(t.percentile(0.0), Some(ms(10)));
        assert_eq!(t.percentile(0.5), Some(ms(12)));
        assert_eq!(t.percentile(1.0), Some(ms(30)));
        assert_eq!(
            t.line(),
            "sent=5 received=4 loss_pct=20.00 reordered=1 rtt_min_ms=10.000 rtt_p50_ms=12.000 rtt_p95_ms=30.000 \
             rtt_max_ms=30.000 span_ms=21.000"
        );
        assert_eq!(t.span, ms(21), "from the first answer counted (0) to the last (1), not the duplicate");
        let none = Tally::from_answers(3, &[]);
        assert_eq!(none.percentile(0.5), None);
        assert!(none.line().contains("loss_pct=100.00") && none.line().contains("rtt_p50_ms=-"));
    }

    #[test]
    fn an_echo_on_loopback_answers_every_probe() {
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let socket = UdpSocket::bind(listen).unwrap();
        let addr = socket.local_addr().unwrap();
        std::thread::spawn(move || serve_echo(&socket));
        let settings = ProbeSettings { to: addr, count: 50, interval: ms(1), size: 64, linger: ms(200) };
        let t = probe(&settings).unwrap();
        assert_eq!(t.received(), 50, "{}", t.line());
        assert_eq!(t.reordered, 0, "{}", t.line());
    }
}
