//! The arbitrator's log: Galera's line format (`2026-11-24 08:00:00 [Note]
//! WSREP: ...`, UTC) on stderr or appended to `--log FILE`, so that the
//! tools that read a garbd log read ours.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use anyhow::{Context, Result};

struct Logger {
    out: Mutex<Box<dyn Write + Send>>,
}

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::max_level() && metadata.target().starts_with("tandem")
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let line = format_line(now_unix(), record.level(), &record.args().to_string());
        if let Ok(mut out) = self.out.lock() {
            // A full disk must not stop the arbitrator: its job is to vote.
            let _ = out.write_all(line.as_bytes());
            let _ = out.flush();
        }
    }

    fn flush(&self) {}
}

/// One log line, newline included.
pub fn format_line(unix: u64, level: log::Level, text: &str) -> String {
    let label = match level {
        log::Level::Error => "ERROR",
        log::Level::Warn => "Warning",
        log::Level::Info => "Note",
        _ => "Debug",
    };
    let stamp = crate::time_fmt::utc(unix);
    let stamp = stamp.trim_end_matches(" UTC");
    format!("{stamp} [{label}] WSREP: {}\n", text.replace('\n', " "))
}

fn now_unix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Installs the logger once per process; `TANDEM_DEBUG=1` adds debug lines.
pub fn install(file: Option<&Path>) -> Result<()> {
    let out: Box<dyn Write + Send> = match file {
        Some(path) => Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open the log file {}", path.display()))?,
        ),
        None => Box::new(std::io::stderr()),
    };
    let logger = Box::leak(Box::new(Logger { out: Mutex::new(out) }));
    log::set_logger(logger).map_err(|_| anyhow::anyhow!("a logger is already installed"))?;
    let debug = std::env::var("TANDEM_DEBUG").is_ok_and(|v| v == "1");
    log::set_max_level(if debug { log::LevelFilter::Debug } else { log::LevelFilter::Info });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_look_like_galeras() {
        assert_eq!(
            format_line(1_795_939_200, log::Level::Info, "Arbitrator synced with the group"),
            "2026-11-29 08:00:00 [Note] WSREP: Arbitrator synced with the group\n"
        );
        assert!(format_line(0, log::Level::Warn, "a\nb").ends_with("[Warning] WSREP: a b\n"));
        assert!(format_line(0, log::Level::Error, "x").contains("[ERROR] WSREP: x"));
    }
}
