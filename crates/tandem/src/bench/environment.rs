//! The facts a reader needs to judge a benchmark: machine, versions, date.

use super::results::{Machine, Versions};
use std::path::Path;
use std::process::Command;

pub fn machine() -> Machine {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    Machine {
        host: read("/proc/sys/kernel/hostname").trim().to_string(),
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        memory_gib: mem_total_kib(&read("/proc/meminfo")) as f64 / (1024.0 * 1024.0),
        cpu: cpu_model(&read("/proc/cpuinfo")),
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
    }
}

pub fn versions(sysbench: &Path, tandem: Option<&Path>) -> Versions {
    Versions {
        mariadb: package_version("mariadb-server")
            .map_or("unknown".into(), |v| format!("mariadb-server {v}")),
        galera: package_version("galera-4").unwrap_or_else(|| "not installed".into()),
        sysbench: command_output(sysbench, &["--version"]).unwrap_or_default(),
        tandem: tandem.map_or("not run".into(), library_identity),
    }
}

/// `libtandem.so` is rebuilt often: name the exact build by its md5.
fn library_identity(path: &Path) -> String {
    let md5 = command_output(Path::new("md5sum"), &[&path.display().to_string()])
        .and_then(|out| out.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into());
    format!(
        "`{}` {} (md5 {md5})",
        path.display(),
        env!("CARGO_PKG_VERSION")
    )
}

fn package_version(package: &str) -> Option<String> {
    let out = command_output(Path::new("dpkg-query"), &["-W", "-f=${Version}", package])?;
    (!out.is_empty()).then_some(out)
}

fn command_output(program: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub fn mem_total_kib(meminfo: &str) -> u64 {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

pub fn cpu_model(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|v| v.split_once(':'))
        .map_or("unknown CPU".into(), |(_, v)| v.trim().to_string())
}

/// Now, UTC, to the minute, without a date crate: days since the epoch to a
/// civil date (Howard Hinnant's algorithm).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc_from_unix(secs)
}

pub fn utc_from_unix(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let (h, m) = (secs % 86_400 / 3600, secs % 3600 / 60);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{d:02} {h:02}:{m:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(utc_from_unix(0), "1970-01-01 00:00");
        assert_eq!(utc_from_unix(951_782_400), "2000-02-29 00:00");
        // 2026-11-22 13:45 UTC
        assert_eq!(utc_from_unix(1_795_355_100), "2026-11-22 13:45");
    }

    #[test]
    fn proc_parsing() {
        assert_eq!(
            mem_total_kib("MemTotal:       24576000 kB\nMemFree: 1 kB\n"),
            24_576_000
        );
        assert_eq!(mem_total_kib(""), 0);
        let cpuinfo = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n";
        assert_eq!(cpu_model(cpuinfo), "Intel(R) Xeon(R) CPU @ 2.20GHz");
    }
}
