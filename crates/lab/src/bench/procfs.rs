//! Resource figures of the servers from /proc: CPU time and peak RSS.
//!
//! Only the `mariadbd` processes count; the sysbench clients run on the same
//! cores but are the same program for every target.

use anyhow::{anyhow, Context, Result};

/// utime + stime of `pid`, in clock ticks.
pub fn cpu_ticks(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_cpu_ticks(&text).with_context(|| format!("parsing {path}"))
}

/// Peak resident set (VmHWM) of `pid`, in KiB.
pub fn peak_rss_kib(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_peak_rss_kib(&text).with_context(|| format!("parsing {path}"))
}

/// Resets `pid`'s peak resident set (VmHWM) to its resident set now, so
/// that a later `peak_rss_kib` covers only what happened since.
pub fn reset_peak_rss(pid: u32) -> Result<()> {
    let path = format!("/proc/{pid}/clear_refs");
    std::fs::write(&path, "5").with_context(|| format!("writing 5 to {path}"))
}

/// Resident set of `pid` now, split as the kernel counts it, in KiB:
/// (anonymous memory, file pages mapped into the process).
pub fn rss_split_kib(pid: u32) -> Result<(u64, u64)> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let get = |key| status_kib(&text, key).with_context(|| format!("parsing {path}"));
    Ok((get("RssAnon:")?, get("RssFile:")?))
}

/// Clock ticks per second for `cpu_ticks` (asked of `getconf`, which needs
/// no unsafe call; Linux has used 100 on every common platform for decades).
pub fn ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .filter(|&t| t > 0)
        .unwrap_or(100)
}

/// Fields 14 and 15 of /proc/PID/stat. The command name (field 2) is in
/// parentheses and may itself contain spaces and ')', so fields are counted
/// from the last ')'.
pub fn parse_cpu_ticks(stat: &str) -> Result<u64> {
    let rest = stat.rfind(')').map(|i| &stat[i + 1..]).ok_or_else(|| anyhow!("no ')' after the command name"))?;
    // rest starts at field 3 (state): utime is field 14, i.e. index 11 here.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let number = |i: usize| -> Result<u64> {
        let word = fields.get(i).ok_or_else(|| anyhow!("too few fields"))?;
        word.parse().map_err(|_| anyhow!("field {} is {word:?}", i + 3))
    };
    Ok(number(11)? + number(12)?)
}

pub fn parse_peak_rss_kib(status: &str) -> Result<u64> {
    status_kib(status, "VmHWM:")
}

/// A `Key:   1234 kB` line of /proc/PID/status.
fn status_kib(status: &str, key: &str) -> Result<u64> {
    let line = status.lines().find(|l| l.starts_with(key)).ok_or_else(|| anyhow!("no {key} line"))?;
    let value = line[key.len()..].trim().trim_end_matches("kB").trim();
    value.parse().map_err(|_| anyhow!("cannot read {key} {value:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat = "3014 (mariadbd) S 1 3014 1711 0 -1 4194560 9000 0 12 0 1234 567 0 0 20 0 40 0 112 3133440 395 0";
        assert_eq!(parse_cpu_ticks(stat).unwrap(), 1234 + 567);
        let odd_name = "77 (a) b) c) R 1 2 3 0 -1 0 0 0 0 0 10 20 0 0 20 0 1 0 5 6 7 0";
        assert_eq!(parse_cpu_ticks(odd_name).unwrap(), 30);
        assert!(parse_cpu_ticks("77 (x) R 1 2").is_err());
        assert!(parse_cpu_ticks("garbage").is_err());
    }

    #[test]
    fn peak_rss_is_vmhwm() {
        let status = "Name:\tmariadbd\nVmPeak:\t 2000000 kB\nVmHWM:\t  812345 kB\nVmRSS:\t  800000 kB\n";
        assert_eq!(parse_peak_rss_kib(status).unwrap(), 812_345);
        assert!(parse_peak_rss_kib("Name:\tkthreadd\n").is_err());
        let split = "VmRSS:\t  900 kB\nRssAnon:\t  700 kB\nRssFile:\t  180 kB\nRssShmem:\t 20 kB\n";
        assert_eq!(status_kib(split, "RssAnon:").unwrap(), 700);
        assert_eq!(status_kib(split, "RssFile:").unwrap(), 180);
    }

    #[test]
    fn our_own_process_reads() {
        let pid = std::process::id();
        assert!(peak_rss_kib(pid).unwrap() > 0);
        assert!(rss_split_kib(pid).unwrap().0 > 0);
        cpu_ticks(pid).unwrap();
        assert!(ticks_per_second() > 0);
    }
}
