//! The facts a reader needs to judge a benchmark: machine, versions, date.
//! The probing itself is shared with `tandem-lab mtr` (`crate::mtr::host`).

use super::results::{Machine, Versions};
use crate::mtr::host;
use std::path::Path;
use std::process::Command;
use tandem::time_fmt;

pub fn machine() -> Machine {
    let m = host::Machine::probe();
    Machine {
        host: m.hostname,
        cores: m.cores,
        memory_gib: m.mem_total_kib as f64 / (1024.0 * 1024.0),
        cpu: m.cpu_model,
        kernel: m.kernel,
    }
}

pub fn versions(sysbench: &Path, tandem: Option<&Path>) -> Versions {
    Versions {
        mariadb: format!("mariadb-server {}", host::package_version("mariadb-server")),
        galera: host::package_version("galera-4"),
        sysbench: sysbench_version(sysbench),
        tandem: tandem.map_or("not run".into(), library_identity),
    }
}

/// `libtandem.so` is rebuilt often: name the exact build by its md5.
fn library_identity(path: &Path) -> String {
    let md5 = host::md5(path).unwrap_or_else(|e| format!("unknown: {e}"));
    format!("`{}` {} (md5 {md5})", path.display(), env!("CARGO_PKG_VERSION"))
}

fn sysbench_version(sysbench: &Path) -> String {
    Command::new(sysbench)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Now, UTC, to the minute: `2026-11-22 13:45`.
pub fn utc_now() -> String {
    time_fmt::utc(host::now_unix())[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_is_to_the_minute() {
        let now = utc_now();
        assert_eq!(now.len(), 16, "{now}");
        assert_eq!(&now[10..11], " ");
    }
}
