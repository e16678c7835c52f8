//! Where a member's durable state lives: a directory, or memory.

use std::io;

use tandem_gcache::{FsStorage, MemStorage, Storage};

/// A directory of the member's durable state. In memory it survives only as
/// long as the process (tests, tools), with exactly the same code paths.
#[derive(Clone, Debug)]
pub enum Disk {
    Fs(FsStorage),
    Mem(MemStorage),
}

impl Disk {
    /// Describes where the state is, for log lines.
    pub fn describe(&self) -> String {
        match self {
            Disk::Fs(fs) => fs.dir().display().to_string(),
            Disk::Mem(_) => "memory".into(),
        }
    }
}

macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            Disk::Fs($s) => $e,
            Disk::Mem($s) => $e,
        }
    };
}

impl Storage for Disk {
    fn list(&self) -> io::Result<Vec<String>> {
        each!(self, s => s.list())
    }
    fn len(&self, name: &str) -> io::Result<u64> {
        each!(self, s => s.len(name))
    }
    fn create(&self, name: &str) -> io::Result<()> {
        each!(self, s => s.create(name))
    }
    fn append(&self, name: &str, data: &[u8]) -> io::Result<()> {
        each!(self, s => s.append(name, data))
    }
    fn read_at(&self, name: &str, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        each!(self, s => s.read_at(name, offset, buf))
    }
    fn truncate(&self, name: &str, len: u64) -> io::Result<()> {
        each!(self, s => s.truncate(name, len))
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        each!(self, s => s.remove(name))
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        each!(self, s => s.rename(from, to))
    }
    fn sync_file(&self, name: &str) -> io::Result<()> {
        each!(self, s => s.sync_file(name))
    }
    fn sync_dir(&self) -> io::Result<()> {
        each!(self, s => s.sync_dir())
    }
}
