//! How far a transfer is: counted by the stream threads, logged on both
//! sides, and written for each side's provider's `/metrics` and health
//! check (the joining server answers no SQL until the end).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tandem_health::sst_progress::{Role, SstProgress};

/// What the streams have moved so far, and what the donor announced.
#[derive(Debug, Default)]
pub struct Tally {
    pub bytes: AtomicU64,
    pub files: AtomicU64,
    pub total_bytes: AtomicU64,
    pub total_files: AtomicU64,
    /// What the chunks' payloads took on the wire (a donor that compresses).
    pub wire_bytes: AtomicU64,
}

impl Tally {
    pub fn with_totals(files: u64, bytes: u64) -> Tally {
        let t = Tally::default();
        t.announce(files, bytes);
        t
    }

    pub fn announce(&self, files: u64, bytes: u64) {
        self.total_files.store(files, Relaxed);
        self.total_bytes.store(bytes, Relaxed);
    }

    pub fn add_bytes(&self, n: u64) {
        self.bytes.fetch_add(n, Relaxed);
    }

    pub fn add_file(&self) {
        self.files.fetch_add(1, Relaxed);
    }

    fn snapshot(&self, role: Role, pid: u32, started_unix_ms: u64) -> SstProgress {
        SstProgress {
            role,
            pid,
            started_unix_ms,
            received_bytes: self.bytes.load(Relaxed),
            total_bytes: self.total_bytes.load(Relaxed),
            received_files: self.files.load(Relaxed),
            total_files: self.total_files.load(Relaxed),
        }
    }

    /// `512.0 MiB of 1.61 GiB (31%) at 380 MB/s, about 3 s left`.
    pub fn line(&self, elapsed: Duration) -> String {
        let p = self.snapshot(Role::Joiner, 0, 0);
        let secs = elapsed.as_secs_f64().max(1e-3);
        let rate = p.received_bytes as f64 / secs;
        let mut line = format!("{} at {:.0} MB/s", p.summary(), rate / 1e6);
        if p.total_bytes > p.received_bytes && rate > 0.0 {
            line.push_str(&format!(", about {:.0} s left", (p.total_bytes - p.received_bytes) as f64 / rate));
        }
        line
    }
}

/// One side's progress file: written at once (so a scrape shows the
/// transfer as soon as it is asked for), then at most every
/// [`Reporter::WRITE_EVERY`], and removed when the reporter goes, whatever
/// the outcome.
pub struct Reporter {
    role: Role,
    data_dir: PathBuf,
    started: Instant,
    started_unix_ms: u64,
    last_write: Instant,
    next_log: Instant,
}

impl Reporter {
    const WRITE_EVERY: Duration = Duration::from_millis(200);
    /// How often a transfer logs where it is.
    pub const LOG_EVERY: Duration = Duration::from_secs(5);

    pub fn start(role: Role, data_dir: &Path, tally: &Tally) -> Reporter {
        let now = Instant::now();
        let unix_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let reporter = Reporter {
            role,
            data_dir: data_dir.to_path_buf(),
            started: now,
            started_unix_ms: unix_ms,
            last_write: now,
            next_log: now + Self::LOG_EVERY,
        };
        reporter.write(tally);
        reporter
    }

    /// Called often by the waiting thread: writes the file and logs a line
    /// when they are due. True when it logged.
    pub fn tick(&mut self, tally: &Tally, verb: &str) -> bool {
        let now = Instant::now();
        if now.duration_since(self.last_write) >= Self::WRITE_EVERY {
            self.write(tally);
            self.last_write = now;
        }
        if now < self.next_log {
            return false;
        }
        super::log_info(&format!("{verb} {}", tally.line(self.started.elapsed())));
        self.next_log += Self::LOG_EVERY;
        true
    }

    /// A progress file that cannot be written costs the DBA a view, not
    /// the transfer: it is not an error.
    fn write(&self, tally: &Tally) {
        let _ = tally.snapshot(self.role, std::process::id(), self.started_unix_ms).write(&self.data_dir);
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        SstProgress::remove(&self.data_dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tandem_health::sst_progress::FILE_NAME;

    #[test]
    fn the_line_says_how_far_how_fast_and_how_long() {
        let t = Tally::with_totals(10, 400_000_000);
        t.add_bytes(100_000_000);
        assert_eq!(t.line(Duration::from_secs(1)), "95.4 MiB of 381.5 MiB (25%) at 100 MB/s, about 3 s left");
        t.add_bytes(300_000_000);
        assert_eq!(t.line(Duration::from_secs(4)), "381.5 MiB of 381.5 MiB (100%) at 100 MB/s");
        assert_eq!(Tally::default().line(Duration::ZERO), "waiting for the donor at 0 MB/s");
    }

    #[test]
    fn the_reporter_shows_the_transfer_while_it_lives_and_removes_it_after() {
        let dir = tempfile::tempdir().unwrap();
        let t = Tally::default();
        {
            let mut r = Reporter::start(Role::Joiner, dir.path(), &t);
            let first = SstProgress::read(dir.path()).expect("written at once");
            assert_eq!((first.pid, first.received_bytes, first.ratio()), (std::process::id(), 0, None));
            assert_eq!(first.role, Role::Joiner);
            t.announce(2, 1000);
            t.add_bytes(250);
            t.add_file();
            r.last_write -= Reporter::WRITE_EVERY;
            assert!(!r.tick(&t, "Received"), "no log line before LOG_EVERY");
            let later = SstProgress::read(dir.path()).unwrap();
            assert_eq!((later.received_bytes, later.received_files, later.ratio()), (250, 1, Some(0.25)));
            assert_eq!(later.started_unix_ms, first.started_unix_ms);
        }
        assert!(!dir.path().join(FILE_NAME).exists(), "the file outlived its transfer");
    }
}
