//! The directory the log and blobs live in, as a trait, so the same code runs on a real
//! directory ([`FsStorage`]) and on a simulated one that can crash and corrupt
//! ([`MemStorage`]).
//!
//! The operations are the few a crash-safe log needs and no more: append-only writes (no
//! overwrite in place, so a torn write can only damage the tail), positional reads through
//! `&self` (no shared cursor, so readers run concurrently), and explicit durability points
//! (`sync_file` for a file's data, `sync_dir` for creations, removals and renames).

mod fs;
mod mem;

pub use fs::FsStorage;
pub use mem::MemStorage;

use std::io;

/// A flat directory of named files.
///
/// Names are plain file names (no `/`). Errors name the file and the operation. Nothing is
/// durable until synced: data after [`Storage::sync_file`], directory changes (create,
/// remove, rename) after [`Storage::sync_dir`].
pub trait Storage: Send + Sync {
    /// Names of all files, sorted.
    fn list(&self) -> io::Result<Vec<String>>;
    /// Current length of a file; `NotFound` if there is none.
    fn len(&self, name: &str) -> io::Result<u64>;
    /// Creates an empty file, or empties an existing one.
    fn create(&self, name: &str) -> io::Result<()>;
    /// Appends `data` at the end of an existing file with one write.
    fn append(&self, name: &str, data: &[u8]) -> io::Result<()>;
    /// Fills `buf` from `offset`; `UnexpectedEof` if the file ends first.
    fn read_at(&self, name: &str, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Cuts a file to `len` bytes (never grows it in this crate's use).
    fn truncate(&self, name: &str, len: u64) -> io::Result<()>;
    /// Removes a file; `NotFound` if there is none.
    fn remove(&self, name: &str) -> io::Result<()>;
    /// Renames `from` to `to`, replacing `to` if it exists.
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;
    /// Makes a file's data durable.
    fn sync_file(&self, name: &str) -> io::Result<()>;
    /// Makes creations, removals and renames durable.
    fn sync_dir(&self) -> io::Result<()>;
}

/// Refuses names that would escape the directory or could not be listed back.
pub(crate) fn check_name(name: &str) -> io::Result<()> {
    let bad = name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']);
    if bad {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad file name {name:?}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_escape_the_directory_are_refused() {
        for name in ["", ".", "..", "a/b", "../x", "a\\b", "a\0b"] {
            let error = check_name(name).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{name:?}");
        }
        for name in ["log.00000000000000000001.seg", "vote", ".hidden", "a..b"] {
            check_name(name).unwrap();
        }
    }
}
