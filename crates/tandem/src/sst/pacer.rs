//! `[sst] rlimit`: a cap on the donor's transfer rate, shared by all its
//! streams, so a state transfer does not take the whole link (or disk) the
//! donor's own clients use. The stock scripts pass the same setting to
//! `pv -L`, and read it the same way: bytes per second, with `k`, `m`,
//! `g` or `t` for powers of 1024.

use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Pacer {
    bytes_per_second: Option<u64>,
    /// When the bytes reserved so far have all been allowed out.
    free_at: Mutex<Option<Instant>>,
}

impl Pacer {
    pub fn new(bytes_per_second: Option<u64>) -> Pacer {
        Pacer { bytes_per_second, free_at: Mutex::new(None) }
    }

    /// Waits until `n` more bytes fit under the cap; at once when there is
    /// none.
    pub fn pace(&self, n: u64) {
        let Some(rate) = self.bytes_per_second else { return };
        let now = Instant::now();
        let start = {
            let mut free_at = self.free_at.lock().unwrap_or_else(|e| e.into_inner());
            let (start, next) = reserve(*free_at, now, n, rate);
            *free_at = Some(next);
            start
        };
        if start > now {
            std::thread::sleep(start - now);
        }
    }
}

/// The slot for `n` bytes: they may go at `start` (no earlier than now, and
/// not before the bytes reserved before them), and the next bytes at the
/// returned end.
fn reserve(free_at: Option<Instant>, now: Instant, n: u64, rate: u64) -> (Instant, Instant) {
    let start = free_at.map_or(now, |t| t.max(now));
    (start, start + Duration::from_secs_f64(n as f64 / rate as f64))
}

/// `10m` -> 10485760. Plain numbers are bytes per second.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_lowercase()),
        _ => (t, ' '),
    };
    let shift = match unit {
        ' ' => 0,
        'k' => 10,
        'm' => 20,
        'g' => 30,
        't' => 40,
        _ => return Err(format!("{text:?}: the unit must be k, m, g or t")),
    };
    let n: u64 = digits.trim().parse().map_err(|_| format!("{text:?} is not a rate such as 80m"))?;
    n.checked_mul(1 << shift).filter(|r| *r > 0).ok_or_else(|| format!("{text:?} is not a usable rate"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_as_pv_reads_them() {
        assert_eq!(parse_rate("80m"), Ok(80 << 20));
        assert_eq!(parse_rate("1G"), Ok(1 << 30));
        assert_eq!(parse_rate(" 512k "), Ok(512 << 10));
        assert_eq!(parse_rate("4096"), Ok(4096));
        for bad in ["", "m", "10x", "-1m", "0", "1.5m", "99999999999t"] {
            assert!(parse_rate(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn reservations_follow_each_other_at_the_rate() {
        let t0 = Instant::now();
        let (start, next) = reserve(None, t0, 1000, 1000);
        assert_eq!((start, next), (t0, t0 + Duration::from_secs(1)));
        // Asked again at once: the bytes wait for the first second to pass.
        let (start2, next2) = reserve(Some(next), t0, 500, 1000);
        assert_eq!((start2, next2), (next, next + Duration::from_millis(500)));
        // After an idle spell the cap does not owe a burst: it starts now.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(reserve(Some(next2), later, 1000, 1000).0, later);
    }

    #[test]
    fn no_cap_means_no_wait() {
        let p = Pacer::new(None);
        p.pace(1 << 40);
        assert!(p.free_at.lock().unwrap().is_none(), "an uncapped pacer reserved time");
    }
}
