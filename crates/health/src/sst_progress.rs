//! A state transfer as it goes, for the provider of either side.
//!
//! The SST method runs as a child process of the server, and a joining
//! server answers no SQL until the transfer is over: the provider's health
//! and metrics listeners are the only place a DBA can watch it. The
//! `tandem` method writes its progress into a small text file in the data
//! directory, replaced whole (written beside, then renamed) a few times a
//! second and removed when the transfer ends; the provider reads it on each
//! scrape. A file whose process is gone (a killed transfer) is not shown.
//! The donor writes one too, so the two ends can be watched side by side.
//!
//! The format is `key=value` lines. Readers skip keys they do not know, so
//! a newer method can add some without breaking an older provider; `role`
//! came later, and a file without it is a joiner's.

use std::path::Path;

/// In the data directory; never sent by a donor, kept by a joiner.
pub const FILE_NAME: &str = ".tandem_sst_progress";

/// Which end of the transfer wrote the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Role {
    #[default]
    Joiner,
    Donor,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Joiner => "joiner",
            Role::Donor => "donor",
        }
    }

    /// What this end does with the bytes: the one word messages and metric
    /// names use for them.
    pub fn verb(self) -> &'static str {
        match self {
            Role::Joiner => "received",
            Role::Donor => "sent",
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SstProgress {
    pub role: Role,
    /// The SST process that writes the file.
    pub pid: u32,
    /// When the joiner started listening for its donor, or the donor
    /// started sending (Unix time, ms).
    pub started_unix_ms: u64,
    /// Received by a joiner, sent by a donor.
    pub received_bytes: u64,
    /// What the donor announced; 0 on a joiner until its first stream
    /// arrives.
    pub total_bytes: u64,
    pub received_files: u64,
    pub total_files: u64,
}

impl SstProgress {
    /// From 0 to 1 once the donor announced its size; `None` before.
    pub fn ratio(&self) -> Option<f64> {
        (self.total_bytes > 0).then(|| (self.received_bytes as f64 / self.total_bytes as f64).min(1.0))
    }

    pub fn render(&self) -> String {
        format!(
            "role={}\npid={}\nstarted_unix_ms={}\nreceived_bytes={}\ntotal_bytes={}\nreceived_files={}\ntotal_files={}\n",
            self.role.name(),
            self.pid,
            self.started_unix_ms,
            self.received_bytes,
            self.total_bytes,
            self.received_files,
            self.total_files
        )
    }

    /// Every known key must be there exactly once and be a number: a torn
    /// or foreign file is an error, never a made-up progress.
    pub fn parse(text: &str) -> Result<SstProgress, String> {
        let mut p = SstProgress::default();
        let mut seen = 0u8;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (key, value) = line.split_once('=').ok_or_else(|| format!("not key=value: {line:?}"))?;
            let (bit, slot): (u8, &mut u64) = match key.trim() {
                "started_unix_ms" => (1, &mut p.started_unix_ms),
                "received_bytes" => (2, &mut p.received_bytes),
                "total_bytes" => (4, &mut p.total_bytes),
                "received_files" => (8, &mut p.received_files),
                "total_files" => (16, &mut p.total_files),
                "role" => {
                    p.role = match value.trim() {
                        "joiner" => Role::Joiner,
                        "donor" => Role::Donor,
                        other => return Err(format!("role={other:?} is neither joiner nor donor")),
                    };
                    continue;
                }
                "pid" => {
                    p.pid = value.trim().parse().map_err(|_| format!("pid={value:?} is not a process id"))?;
                    seen |= 32;
                    continue;
                }
                _ => continue,
            };
            if seen & bit != 0 {
                return Err(format!("{key} given twice"));
            }
            *slot = value.trim().parse().map_err(|_| format!("{key}={value:?} is not a number"))?;
            seen |= bit;
        }
        if seen != 63 {
            return Err("incomplete".into());
        }
        Ok(p)
    }

    /// Replaces the file in `data_dir` whole: a reader sees the old
    /// content or the new, never half of each.
    pub fn write(&self, data_dir: &Path) -> std::io::Result<()> {
        let tmp = data_dir.join(format!("{FILE_NAME}.tmp"));
        std::fs::write(&tmp, self.render())?;
        std::fs::rename(&tmp, data_dir.join(FILE_NAME))
    }

    pub fn remove(data_dir: &Path) {
        let _ = std::fs::remove_file(data_dir.join(format!("{FILE_NAME}.tmp")));
        let _ = std::fs::remove_file(data_dir.join(FILE_NAME));
    }

    /// The transfer under way in `data_dir`, if any: `None` when there is
    /// no file, it does not parse, or the process that wrote it is gone.
    pub fn read(data_dir: &Path) -> Option<SstProgress> {
        let text = std::fs::read_to_string(data_dir.join(FILE_NAME)).ok()?;
        let progress = SstProgress::parse(&text).ok()?;
        Path::new(&format!("/proc/{}", progress.pid)).exists().then_some(progress)
    }

    /// For the health check's answer and the method's log:
    /// `512.0 MiB of 1.61 GiB (31%)`, or what is known so far.
    pub fn summary(&self) -> String {
        match self.ratio() {
            Some(r) => format!("{} of {} ({:.0}%)", human(self.received_bytes), human(self.total_bytes), r * 100.0),
            None if self.received_bytes == 0 && self.role == Role::Joiner => "waiting for the donor".into(),
            None => format!("{} {}", human(self.received_bytes), self.role.verb()),
        }
    }
}

/// Bytes for people: MiB below a GiB, GiB above.
pub fn human(bytes: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if bytes as f64 >= 1024.0 * MIB {
        format!("{:.2} GiB", bytes as f64 / (1024.0 * MIB))
    } else {
        format!("{:.1} MiB", bytes as f64 / MIB)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SstProgress {
        SstProgress {
            role: Role::Joiner,
            pid: std::process::id(),
            started_unix_ms: 1_764_000_000_000,
            received_bytes: 512 << 20,
            total_bytes: 2048 << 20,
            received_files: 3,
            total_files: 40,
        }
    }

    #[test]
    fn renders_and_parses_back() {
        assert_eq!(SstProgress::parse(&sample().render()).unwrap(), sample());
        let with_new_key = format!("{}donor=10.0.0.2\n", sample().render());
        assert_eq!(SstProgress::parse(&with_new_key).unwrap(), sample(), "unknown keys are skipped");
        let donor = SstProgress { role: Role::Donor, ..sample() };
        assert_eq!(SstProgress::parse(&donor.render()).unwrap(), donor);
    }

    /// A file written before `role` existed is a joiner's; a role nobody
    /// knows is refused rather than guessed.
    #[test]
    fn the_role_defaults_to_joiner_and_is_checked() {
        let text = sample().render();
        let without: String = text.lines().filter(|l| !l.starts_with("role=")).map(|l| format!("{l}\n")).collect();
        assert_ne!(without, text);
        assert_eq!(SstProgress::parse(&without).unwrap().role, Role::Joiner);
        let odd = text.replace("role=joiner", "role=garbd");
        assert!(SstProgress::parse(&odd).unwrap_err().contains("neither joiner nor donor"));
    }

    #[test]
    fn torn_or_foreign_text_is_refused() {
        let text = sample().render();
        for cut in 0..text.len() {
            let part = &text[..cut];
            // A cut inside the last value can still parse, as a smaller
            // number; every other cut leaves a key out.
            if let Ok(p) = SstProgress::parse(part) {
                assert!(cut > text.rfind('=').unwrap(), "cut at {cut} parsed: {p:?}");
            }
        }
        assert!(SstProgress::parse("pid=1\nreceived_bytes=x\n").is_err());
        assert!(SstProgress::parse(&format!("{text}total_bytes=1\n")).unwrap_err().contains("twice"));
        assert!(SstProgress::parse("GET / HTTP/1.1").is_err());
    }

    #[test]
    fn ratio_and_summary() {
        let p = sample();
        assert_eq!(p.ratio(), Some(0.25));
        assert_eq!(p.summary(), "512.0 MiB of 2.00 GiB (25%)");
        let waiting = SstProgress { received_bytes: 0, total_bytes: 0, ..p.clone() };
        assert_eq!((waiting.ratio(), waiting.summary().as_str()), (None, "waiting for the donor"));
        let sending = SstProgress { role: Role::Donor, total_bytes: 0, ..p.clone() };
        assert_eq!(sending.summary(), "512.0 MiB sent");
        let over = SstProgress { received_bytes: 3 << 30, ..p };
        assert_eq!(over.ratio(), Some(1.0), "never above 1");
    }

    #[test]
    fn written_files_are_read_only_while_their_process_lives() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(SstProgress::read(dir.path()), None);
        sample().write(dir.path()).unwrap();
        assert_eq!(SstProgress::read(dir.path()), Some(sample()));
        assert!(!dir.path().join(format!("{FILE_NAME}.tmp")).exists());
        // A pid that cannot exist (above the kernel's pid_max limit).
        SstProgress { pid: u32::MAX, ..sample() }.write(dir.path()).unwrap();
        assert_eq!(SstProgress::read(dir.path()), None, "a transfer whose process is gone is not shown");
        SstProgress::remove(dir.path());
        assert!(!dir.path().join(FILE_NAME).exists());
    }
}
