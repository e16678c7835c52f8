//! Refused connections are logged once per peer and reason per minute.
//!
//! A refused peer retries every few seconds, forever: a line per attempt
//! would bury everything else in the error log. The first attempt is logged
//! in full; the repeats are counted, and the next line says how many.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::sync::lock;

/// How long repeats of one refusal stay quiet.
pub const QUIET: Duration = Duration::from_secs(60);

#[derive(Default)]
pub struct Refusals {
    /// (who, why) → when last logged, repeats since.
    seen: Mutex<BTreeMap<(String, String), (Instant, u64)>>,
}

impl Refusals {
    /// Whether to log this refusal now; `Some(n)`: yes, `n` repeats were
    /// left out since the last line.
    pub fn log_now(&self, who: &str, why: &str, now: Instant) -> Option<u64> {
        let mut seen = lock(&self.seen);
        if seen.len() > 10_000 {
            // A scan from many addresses: forget, rather than grow forever.
            seen.retain(|_, (at, _)| now.duration_since(*at) < QUIET);
        }
        match seen.get_mut(&(who.to_string(), why.to_string())) {
            Some((at, repeats)) if now.duration_since(*at) < QUIET => {
                *repeats += 1;
                None
            }
            Some((at, repeats)) => {
                let left_out = *repeats;
                (*at, *repeats) = (now, 0);
                Some(left_out)
            }
            None => {
                seen.insert((who.to_string(), why.to_string()), (now, 0));
                Some(0)
            }
        }
    }
}

/// A refusal's kind with its reason, so that two different failures from one
/// address (another CA, then an expired certificate) are both reported. The
/// digits go: a reason that names a time or a count is still one reason.
pub fn reason_key(kind: &str, reason: &str) -> String {
    let reason: String = reason.chars().filter(|c| !c.is_ascii_digit()).collect();
    format!("{kind}: {reason}")
}

/// " (12 more like it in the last minute)" or nothing.
pub fn repeats(left_out: u64) -> String {
    if left_out == 0 {
        String::new()
    } else {
        format!(" ({left_out} more like it since the last report)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_peer_and_reason_per_quiet_period() {
        let r = Refusals::default();
        let t0 = Instant::now();
        assert_eq!(r.log_now("10.0.0.9", "expired", t0), Some(0));
        assert_eq!(r.log_now("10.0.0.9", "expired", t0 + Duration::from_secs(2)), None);
        assert_eq!(r.log_now("10.0.0.9", "expired", t0 + Duration::from_secs(4)), None);
        assert_eq!(r.log_now("10.0.0.9", "unknown CA", t0 + Duration::from_secs(4)), Some(0), "another reason");
        assert_eq!(r.log_now("10.0.0.8", "expired", t0 + Duration::from_secs(4)), Some(0), "another peer");
        assert_eq!(
            r.log_now("10.0.0.9", "expired", t0 + QUIET + Duration::from_secs(1)),
            Some(2),
            "the repeats are counted"
        );
        assert_eq!(repeats(2), " (2 more like it since the last report)");
        assert_eq!(repeats(0), "");
    }
}
