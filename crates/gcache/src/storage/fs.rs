//! [`Storage`] on a real directory.
//!
//! Open files are kept in a small shared cache so that an append or a read costs one system
//! call, not an open, a call and a close. Appends use `O_APPEND` (one `write`), reads use
//! `pread` (`read_exact_at`), so readers share file handles without a shared cursor.
//!
//! One `FsStorage` (and its clones) per directory: a second instance would keep its own
//! handle cache and could go on using a file the first one removed.

use super::{check_name, Storage};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// Past this many open handles the cache is emptied (handles in use stay open until their
/// holders drop them), so a directory with many segments cannot exhaust descriptors.
const MAX_OPEN_FILES: usize = 64;

/// A real directory. Clone it to share it (and its handle cache) between threads.
#[derive(Clone, Debug)]
pub struct FsStorage {
    dir: Arc<PathBuf>,
    open_files: Arc<RwLock<BTreeMap<String, Arc<File>>>>,
}

impl FsStorage {
    /// Uses `dir`, creating it (and its parents) if missing.
    pub fn new(dir: impl Into<PathBuf>) -> io::Result<FsStorage> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(|e| context(e, &dir, "create directory"))?;
        Ok(FsStorage { dir: Arc::new(dir), open_files: Arc::default() })
    }

    /// The directory this storage works in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, name: &str) -> io::Result<PathBuf> {
        check_name(name)?;
        Ok(self.dir.join(name))
    }

    /// The cached handle of an existing file, opened for reading and appending.
    fn handle(&self, name: &str) -> io::Result<Arc<File>> {
        if let Some(file) = self.cache_read().get(name) {
            return Ok(Arc::clone(file));
        }
        let path = self.path(name)?;
        let file = OpenOptions::new().read(true).append(true).open(&path).map_err(|e| context(e, &path, "open"))?;
        Ok(self.remember(name, file))
    }

    fn remember(&self, name: &str, file: File) -> Arc<File> {
        let file = Arc::new(file);
        let mut cache = self.cache_write();
        if cache.len() >= MAX_OPEN_FILES {
            cache.clear();
        }
        cache.insert(name.to_string(), Arc::clone(&file));
        file
    }

    fn forget(&self, name: &str) {
        self.cache_write().remove(name);
    }

    // A panic while holding the lock cannot leave the map half-updated (each access is a
    // single map call), so a poisoned lock is still safe to use.
    fn cache_read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<File>>> {
        self.open_files.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn cache_write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<File>>> {
        self.open_files.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Adds the path and the operation to an error, keeping its kind for callers that match on it.
fn context(error: io::Error, path: &Path, operation: &str) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {operation}: {error}", path.display()))
}

impl Storage for FsStorage {
    fn list(&self) -> io::Result<Vec<String>> {
        let entries = std::fs::read_dir(&*self.dir).map_err(|e| context(e, &self.dir, "list"))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| context(e, &self.dir, "list"))?;
            let is_file = entry.file_type().map(|kind| kind.is_file()).unwrap_or(false);
            // Names that are not UTF-8 cannot be ours; skip rather than fail the listing.
            if let (true, Ok(name)) = (is_file, entry.file_name().into_string()) {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    fn len(&self, name: &str) -> io::Result<u64> {
        let path = self.path(name)?;
        let metadata = std::fs::metadata(&path).map_err(|e| context(e, &path, "stat"))?;
        Ok(metadata.len())
    }

    fn create(&self, name: &str) -> io::Result<()> {
        let path = self.path(name)?;
        self.forget(name);
        // O_APPEND and O_TRUNC cannot be combined through OpenOptions: open, then empty.
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|e| context(e, &path, "create"))?;
        file.set_len(0).map_err(|e| context(e, &path, "create"))?;
        self.remember(name, file);
        Ok(())
    }

    fn append(&self, name: &str, data: &[u8]) -> io::Result<()> {
        let file = self.handle(name)?;
        (&*file).write_all(data).map_err(|e| context(e, &self.dir.join(name), "append"))
    }

    fn read_at(&self, name: &str, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let file = self.handle(name)?;
        file.read_exact_at(buf, offset).map_err(|e| {
            let operation = format!("read {} bytes at offset {offset}", buf.len());
            context(e, &self.dir.join(name), &operation)
        })
    }

    fn truncate(&self, name: &str, len: u64) -> io::Result<()> {
        let file = self.handle(name)?;
        file.set_len(len).map_err(|e| context(e, &self.dir.join(name), "truncate"))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let path = self.path(name)?;
        self.forget(name);
        std::fs::remove_file(&path).map_err(|e| context(e, &path, "remove"))
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let from_path = self.path(from)?;
        let to_path = self.path(to)?;
        self.forget(from);
        self.forget(to);
        std::fs::rename(&from_path, &to_path)
            .map_err(|e| context(e, &from_path, &format!("rename to {}", to_path.display())))
    }

    fn sync_file(&self, name: &str) -> io::Result<()> {
        // fdatasync also flushes the file size when it changed, which is all an append needs.
        let file = self.handle(name)?;
        file.sync_data().map_err(|e| context(e, &self.dir.join(name), "fsync"))
    }

    fn sync_dir(&self) -> io::Result<()> {
        let dir = File::open(&*self.dir).map_err(|e| context(e, &self.dir, "open directory"))?;
        dir.sync_all().map_err(|e| context(e, &self.dir, "fsync directory"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn storage() -> (tempfile::TempDir, FsStorage) {
        let dir = tempfile::tempdir().unwrap();
        let storage = FsStorage::new(dir.path().join("sub/dir")).unwrap();
        (dir, storage)
    }

    #[test]
    fn creates_missing_directory_and_lists_sorted_files_only() {
        let (_dir, storage) = storage();
        assert!(storage.dir().is_dir());
        storage.create("b").unwrap();
        storage.create("a").unwrap();
        std::fs::create_dir(storage.dir().join("c-dir")).unwrap();
        assert_eq!(storage.list().unwrap(), vec!["a".to_string(), "b".to_string()]);
    }

    #[test]
    fn append_read_truncate_round_trip() {
        let (_dir, storage) = storage();
        storage.create("f").unwrap();
        storage.append("f", b"hello ").unwrap();
        storage.append("f", b"world").unwrap();
        assert_eq!(storage.len("f").unwrap(), 11);
        let mut buf = [0u8; 5];
        storage.read_at("f", 6, &mut buf).unwrap();
        assert_eq!(&buf, b"world");
        storage.truncate("f", 5).unwrap();
        storage.append("f", b"!").unwrap();
        let mut buf = [0u8; 6];
        storage.read_at("f", 0, &mut buf).unwrap();
        assert_eq!(&buf, b"hello!");
        storage.sync_file("f").unwrap();
        storage.sync_dir().unwrap();
    }

    #[test]
    fn create_empties_an_existing_file() {
        let (_dir, storage) = storage();
        storage.create("f").unwrap();
        storage.append("f", b"old").unwrap();
        storage.create("f").unwrap();
        assert_eq!(storage.len("f").unwrap(), 0);
        storage.append("f", b"new").unwrap();
        assert_eq!(std::fs::read(storage.dir().join("f")).unwrap(), b"new");
    }

    #[test]
    fn reading_past_the_end_is_unexpected_eof_naming_the_file() {
        let (_dir, storage) = storage();
        storage.create("f").unwrap();
        storage.append("f", b"abc").unwrap();
        let mut buf = [0u8; 4];
        let error = storage.read_at("f", 0, &mut buf).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
        assert!(error.to_string().contains("/f: read 4 bytes at offset 0"), "{error}");
    }

    #[test]
    fn missing_files_are_not_found() {
        let (_dir, storage) = storage();
        assert_eq!(storage.len("nope").unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(storage.remove("nope").unwrap_err().kind(), io::ErrorKind::NotFound);
        let error = storage.append("nope", b"x").unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        assert!(error.to_string().contains("nope"), "{error}");
    }

    #[test]
    fn rename_replaces_and_drops_cached_handles() {
        let (_dir, storage) = storage();
        storage.create("a").unwrap();
        storage.append("a", b"new").unwrap();
        storage.create("b").unwrap();
        storage.append("b", b"old").unwrap();
        storage.rename("a", "b").unwrap();
        let mut buf = [0u8; 3];
        storage.read_at("b", 0, &mut buf).unwrap();
        assert_eq!(&buf, b"new");
        assert_eq!(storage.list().unwrap(), vec!["b".to_string()]);
        storage.remove("b").unwrap();
        assert!(storage.list().unwrap().is_empty());
    }

    #[test]
    fn many_files_do_not_keep_many_handles() {
        let (_dir, storage) = storage();
        for i in 0..(MAX_OPEN_FILES * 2) {
            let name = format!("f{i}");
            storage.create(&name).unwrap();
            storage.append(&name, b"x").unwrap();
        }
        assert!(storage.cache_read().len() <= MAX_OPEN_FILES);
        let mut buf = [0u8; 1];
        storage.read_at("f0", 0, &mut buf).unwrap();
        assert_eq!(&buf, b"x");
    }

    #[test]
    fn clones_share_the_directory_and_are_send_sync() {
        fn assert_send_sync<T: Send + Sync + Clone>() {}
        assert_send_sync::<FsStorage>();
        let (_dir, storage) = storage();
        let clone = storage.clone();
        storage.create("f").unwrap();
        clone.append("f", b"1").unwrap();
        assert_eq!(storage.len("f").unwrap(), 1);
    }

    #[test]
    fn bad_names_are_refused() {
        let (_dir, storage) = storage();
        assert_eq!(storage.create("../x").unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }
}
