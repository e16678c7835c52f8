//! Times and durations as the logs and reports write them, with no clock
//! crate: UTC from Unix seconds, and short durations.

/// `2026-11-22 02:47:58 UTC`.
pub fn utc(unix: u64) -> String {
    let (days, secs) = (unix / 86_400, unix % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", secs / 3600, secs / 60 % 60, secs % 60)
}

/// `2026-11-22`.
pub fn utc_date(unix: u64) -> String {
    utc(unix)[..10].to_string()
}

/// Days since 1970-01-01 -> (year, month, day), proleptic Gregorian
/// (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `1h02m03s`, `12m03s`, `45s`.
pub fn duration(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, s) => format!("{h}h{m:02}m{s:02}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formatting() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        // 2026-11-22 02:47:58 UTC
        assert_eq!(utc(1_795_315_678), "2026-11-22 02:47:58 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
    }

    #[test]
    fn durations() {
        assert_eq!(duration(45.4), "45s");
        assert_eq!(duration(723.0), "12m03s");
        assert_eq!(duration(3723.0), "1h02m03s");
    }
}
