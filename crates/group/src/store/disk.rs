//! Where a member's durable state lives: files in a directory, or memory.
//!
//! On disk every file of the state is named `<name>.<suffix>`, the suffix
//! being `gcache.name` (`galera.cache`): `identity.galera.cache`,
//! `log.00000000000000000001.seg.galera.cache`, ... They live as plain files
//! in `gcache.dir`, the data directory by default, because MariaDB takes
//! every directory there for a database (and logs an error for one named
//! `galera.cache`), and because MariaDB's SST scripts leave the names that
//! end in `galera.cache` in place when they empty the data directory.

use std::io;
use std::path::Path;

use tandem_gcache::{FsStorage, MemStorage, Storage};

/// A member's durable state: files with a common suffix in a directory, or
/// memory (tests, tools: exactly the same code paths, gone with the process).
#[derive(Clone, Debug)]
pub enum Disk {
    Fs { storage: FsStorage, suffix: String },
    Mem(MemStorage),
}

impl Disk {
    pub fn files(dir: &Path, suffix: &str) -> io::Result<Disk> {
        Ok(Disk::Fs { storage: FsStorage::new(dir)?, suffix: format!(".{}", suffix.trim_start_matches('.')) })
    }

    /// Describes where the state is, for log lines.
    pub fn describe(&self) -> String {
        match self {
            Disk::Fs { storage, suffix } => format!("{}/*{suffix}", storage.dir().display()),
            Disk::Mem(_) => "memory".into(),
        }
    }

    fn real(&self, name: &str) -> String {
        match self {
            Disk::Fs { suffix, .. } => format!("{name}{suffix}"),
            Disk::Mem(_) => name.to_string(),
        }
    }
}

impl Storage for Disk {
    fn list(&self) -> io::Result<Vec<String>> {
        match self {
            Disk::Fs { storage, suffix } => Ok(storage
                .list()?
                .into_iter()
                .filter_map(|n| n.strip_suffix(suffix.as_str()).filter(|s| !s.is_empty()).map(str::to_string))
                .collect()),
            Disk::Mem(m) => m.list(),
        }
    }
    fn len(&self, name: &str) -> io::Result<u64> {
        let real = self.real(name);
        each(self, |s| s.len(&real))
    }
    fn create(&self, name: &str) -> io::Result<()> {
        let real = self.real(name);
        each(self, |s| s.create(&real))
    }
    fn append(&self, name: &str, data: &[u8]) -> io::Result<()> {
        let real = self.real(name);
        each(self, |s| s.append(&real, data))
    }
    fn read_at(&self, name: &str, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let real = self.real(name);
        each(self, |s| s.read_at(&real, offset, buf))
    }
    fn truncate(&self, name: &str, len: u64) -> io::Result<()> {
        let real = self.real(name);
        each(self, |s| s.truncate(&real, len))
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        let real = self.real(name);
        each(self, |s| s.remove(&real))
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (from, to) = (self.real(from), self.real(to));
        each(self, |s| s.rename(&from, &to))
    }
    fn sync_file(&self, name: &str) -> io::Result<()> {
        let real = self.real(name);
        each(self, |s| s.sync_file(&real))
    }
    fn sync_dir(&self) -> io::Result<()> {
        each(self, |s| s.sync_dir())
    }
}

/// Runs `f` on the underlying storage.
fn each<R>(disk: &Disk, f: impl FnOnce(&dyn Storage) -> R) -> R {
    match disk {
        Disk::Fs { storage, .. } => f(storage),
        Disk::Mem(m) => f(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_carry_the_suffix_and_only_they_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ibdata1"), b"not ours").unwrap();
        std::fs::write(dir.path().join("galera.cache"), b"Galera's own ring buffer").unwrap();
        let disk = Disk::files(dir.path(), "galera.cache").unwrap();
        disk.create("vote").unwrap();
        disk.append("vote", b"v").unwrap();
        disk.rename("vote", "vote2").unwrap();
        assert!(dir.path().join("vote2.galera.cache").is_file());
        assert_eq!(disk.list().unwrap(), vec!["vote2".to_string()]);
        let mut buf = [0u8; 1];
        disk.read_at("vote2", 0, &mut buf).unwrap();
        assert_eq!(&buf, b"v");
    }
}
