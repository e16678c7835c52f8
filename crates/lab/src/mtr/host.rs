//! Facts about the machine and the installed packages for the report header,
//! and small helpers (md5, file times) that need no extra crate. UTC times
//! and durations are written by `tandem::time_fmt`.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// Packages whose versions the report names.
pub const PACKAGES: [&str; 5] = ["mariadb-server", "mariadb-test", "mariadb-backup", "galera-4", "socat"];

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub hostname: String,
    pub cores: usize,
    pub cpu_model: String,
    pub mem_total_kib: u64,
    pub kernel: String,
    pub os: String,
    /// `/proc/loadavg`'s first three fields when the run started.
    pub load_avg: String,
    /// (package, version or "not installed").
    pub packages: Vec<(String, String)>,
}

impl Machine {
    pub fn probe() -> Machine {
        let cpuinfo = read("/proc/cpuinfo");
        let meminfo = read("/proc/meminfo");
        Machine {
            hostname: read("/proc/sys/kernel/hostname").trim().to_string(),
            cores: cores(&cpuinfo),
            cpu_model: cpu_model(&cpuinfo),
            mem_total_kib: mem_total_kib(&meminfo),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            os: os_name(&read("/etc/os-release")),
            load_avg: read("/proc/loadavg").split_whitespace().take(3).collect::<Vec<_>>().join(" "),
            packages: PACKAGES.iter().map(|p| (p.to_string(), package_version(p))).collect(),
        }
    }

    pub fn package(&self, name: &str) -> &str {
        self.packages.iter().find(|(p, _)| p == name).map(|(_, v)| v.as_str()).unwrap_or("unknown")
    }
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

pub fn cores(cpuinfo: &str) -> usize {
    let n = cpuinfo.lines().filter(|l| l.split(':').next().map(str::trim) == Some("processor")).count();
    if n > 0 {
        n
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

fn cpu_model(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .find_map(|l| {
            let (key, value) = l.split_once(':')?;
            (key.trim() == "model name").then(|| value.trim().to_string())
        })
        .unwrap_or_default()
}

pub fn mem_total_kib(meminfo: &str) -> u64 {
    meminfo
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix("MemTotal:")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or(0)
}

fn os_name(os_release: &str) -> String {
    os_release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_default()
}

/// `dpkg-query`'s version of an installed package, else "not installed".
pub fn package_version(package: &str) -> String {
    let out = Command::new("dpkg-query").args(["-W", "-f", "${Status}|${Version}", package]).output();
    match out {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            match text.split_once('|') {
                Some((status, version)) if status.ends_with(" installed") => version.to_string(),
                _ => "not installed".into(),
            }
        }
        Ok(_) => "not installed".into(),
        Err(_) => "unknown (no dpkg-query)".into(),
    }
}

/// Hex md5 of a file (coreutils' md5sum; no hashing crate needed).
pub fn md5(path: &Path) -> Result<String> {
    let out = Command::new("md5sum").arg(path).output().context("cannot run md5sum")?;
    if !out.status.success() {
        bail!("md5sum {} failed: {}", path.display(), String::from_utf8_lossy(&out.stderr).trim());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.split_whitespace().next().unwrap_or_default().to_string())
}

pub fn now_unix() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

pub fn mtime_unix(path: &Path) -> u64 {
    path.metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_parsing() {
        let cpuinfo = "processor\t: 0\nmodel name\t: Intel Xeon\n\nprocessor\t: 1\nmodel name\t: Intel Xeon\n";
        assert_eq!(cores(cpuinfo), 2);
        assert_eq!(cpu_model(cpuinfo), "Intel Xeon");
        assert_eq!(mem_total_kib("MemTotal:       24608404 kB\nMemFree: 1 kB\n"), 24_608_404);
        assert_eq!(
            os_name("NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"),
            "Debian GNU/Linux 12 (bookworm)"
        );
    }
}
