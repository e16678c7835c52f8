//! One beat for the member's periodic looks. The detector, eviction, the
//! purger, the rejoin watch and the weight watch each look at their state
//! once a period; each on its own clock, an idle member's runtime woke once
//! for every one of them. On a common beat (multiples of the period since
//! the member's Raft instance started), the looks that fall due together
//! wake it once between them.

use std::time::Duration;

use tokio::time::Instant;

use crate::shared::Shared;

/// The first instant after `now` that is a whole number of `period`s after
/// `origin`. A zero period is due at once.
pub fn next_beat(origin: Instant, period: Duration, now: Instant) -> Instant {
    let Some(since) = now.checked_duration_since(origin) else {
        return origin;
    };
    let period_ns = period.as_nanos();
    if period_ns == 0 {
        return now;
    }
    let beats = since.as_nanos() / period_ns + 1;
    let ahead = period_ns * beats - since.as_nanos();
    now + Duration::from_nanos(u64::try_from(ahead).unwrap_or(u64::MAX))
}

/// Sleeps until this member's next beat of `period`.
pub async fn sleep_to_next(shared: &Shared, period: Duration) {
    tokio::time::sleep_until(next_beat(shared.started, period, Instant::now())).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beats_fall_on_whole_periods_from_the_origin() {
        let origin = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(next_beat(origin, ms(500), origin), origin + ms(500), "strictly after now");
        assert_eq!(next_beat(origin, ms(500), origin + ms(499)), origin + ms(500));
        assert_eq!(next_beat(origin, ms(500), origin + ms(500)), origin + ms(1000));
        assert_eq!(next_beat(origin, ms(1000), origin + ms(1200)), origin + ms(2000));
        // A 1 s beat is also a 500 ms beat: the two looks share a wake.
        let half = next_beat(origin, ms(500), origin + ms(1700));
        let whole = next_beat(origin, ms(1000), origin + ms(1700));
        assert_eq!((half, whole), (origin + ms(2000), origin + ms(2000)));
        assert_eq!(next_beat(origin, Duration::ZERO, origin + ms(3)), origin + ms(3));
        assert_eq!(next_beat(origin + ms(10), ms(100), origin), origin + ms(10), "before the origin");
    }
}
