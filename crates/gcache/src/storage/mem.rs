//! [`Storage`] in memory, with a model of what a machine finds on disk after a crash
//! (documented on [`MemStorage`]).

use super::{check_name, Storage};
use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

/// An in-memory directory, with a model of what a machine finds on disk after a crash.
/// Clones share the same files; it is `Send + Sync`.
///
/// # Crash model
///
/// Files are inodes; names point at inodes. Two things are tracked besides the current state:
///
/// - **Data.** For each inode, the bytes as of its last [`Storage::sync_file`]. Appends after
///   that are in the "page cache": a power loss keeps a prefix of them, as long as the
///   `tear` closure passed to [`MemStorage::crash`] chooses (any cut).
///   A truncation that cuts into synced bytes is a metadata change a power loss undoes
///   until the file is synced again: such a file comes back exactly as last synced, old
///   bytes and all, whatever `tear` would say (it is not asked), which is what a journaling
///   file system may do with an uncommitted truncate.
/// - **kill -9** loses nothing: [`MemStorage::kill`]. (`crash` with a closure that keeps
///   every byte is the same only when no truncation or directory operation is pending.)
/// - **Directory.** Creations, removals and renames are directory operations. They become
///   durable together at [`Storage::sync_dir`]. Until then a crash keeps only a prefix of them
///   in the order they were made: [`MemStorage::crash`] keeps none (every unsynced creation,
///   removal and rename is undone), [`MemStorage::crash_keeping_dir_ops`] keeps the first `n`.
///   A file whose creation is undone vanishes with its data, even if that data was synced.
///
/// `create` of an existing name empties that file in place (`O_TRUNC`): a data operation, not
/// a directory one.
///
/// Nothing here is random: every choice comes from the caller, so a simulation that draws
/// the choices from its seed replays exactly.
#[derive(Clone, Debug, Default)]
pub struct MemStorage {
    state: Arc<Mutex<MemState>>,
}

#[derive(Debug, Default)]
struct MemState {
    inodes: BTreeMap<u64, MemFile>,
    /// The directory as it is now.
    names: BTreeMap<String, u64>,
    /// The directory as of the last `sync_dir`.
    durable_names: BTreeMap<String, u64>,
    /// Directory operations since the last `sync_dir`, oldest first.
    pending: Vec<DirOp>,
    next_inode: u64,
    /// Bytes all current files may hold together; appends beyond fail with `StorageFull`.
    capacity: Option<u64>,
}

#[derive(Clone, Debug, Default)]
struct MemFile {
    data: Vec<u8>,
    /// `data[..durable_len]` is on disk.
    durable_len: usize,
    /// Synced bytes an unsynced truncation cut off: the disk holds
    /// `data[..durable_len]` followed by these.
    cut_tail: Vec<u8>,
}

#[derive(Clone, Debug)]
enum DirOp {
    Create { name: String, inode: u64 },
    Remove { name: String },
    Rename { from: String, to: String },
}

impl MemFile {
    fn truncate(&mut self, len: usize) {
        if len < self.durable_len {
            let mut cut = self.data[len..self.durable_len].to_vec();
            cut.append(&mut self.cut_tail);
            self.cut_tail = cut;
            self.durable_len = len;
        }
        self.data.resize(len, 0);
    }

    /// The bytes a crash leaves of this file.
    fn after_crash(&self, name: &str, tear: &mut dyn FnMut(&str, u64, u64) -> u64) -> Vec<u8> {
        if !self.cut_tail.is_empty() {
            // The truncation never reached the disk: the file as last synced.
            let mut bytes = self.data[..self.durable_len].to_vec();
            bytes.extend_from_slice(&self.cut_tail);
            return bytes;
        }
        let synced = self.durable_len as u64;
        let current = self.data.len() as u64;
        let keep = if synced < current { tear(name, synced, current) } else { current };
        // A closure answering outside synced..=current is clamped, not trusted.
        let keep = keep.clamp(synced, current) as usize;
        self.data[..keep].to_vec()
    }
}

fn not_found(name: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("mem:{name}: no such file"))
}

impl MemStorage {
    /// An empty directory.
    pub fn new() -> MemStorage {
        MemStorage::default()
    }

    /// Whether `other` is this directory (a clone of it), not a copy.
    pub fn same_as(&self, other: &MemStorage) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }

    fn lock(&self) -> MutexGuard<'_, MemState> {
        // Every mutation below completes or returns before it could panic, so a poisoned
        // lock (a panicking test thread) still guards consistent state.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The directory as a machine would find it after a power loss now, with every
    /// directory operation since the last `sync_dir` undone. For each surviving file with
    /// unsynced data, in name order, `tear(name, synced_len, current_len)` picks how many
    /// bytes survive (clamped to `synced_len..=current_len`). `self` is left as it was.
    pub fn crash(&self, tear: &mut dyn FnMut(&str, u64, u64) -> u64) -> MemStorage {
        self.crash_keeping_dir_ops(0, tear)
    }

    /// Like [`MemStorage::crash`], but the first `kept` directory operations since the last
    /// `sync_dir` survive (see [`MemStorage::pending_dir_ops`] for how many there are).
    pub fn crash_keeping_dir_ops(&self, kept: usize, tear: &mut dyn FnMut(&str, u64, u64) -> u64) -> MemStorage {
        let state = self.lock();
        let mut names = state.durable_names.clone();
        for operation in state.pending.iter().take(kept) {
            match operation {
                DirOp::Create { name, inode } => {
                    names.insert(name.clone(), *inode);
                }
                DirOp::Remove { name } => {
                    names.remove(name);
                }
                DirOp::Rename { from, to } => {
                    if let Some(inode) = names.remove(from) {
                        names.insert(to.clone(), inode);
                    }
                }
            }
        }
        let files = names.into_iter().map(|(name, inode)| {
            let data = state.inodes.get(&inode).map(|file| file.after_crash(&name, tear));
            (name, data.unwrap_or_default())
        });
        MemStorage::survivor(files, state.capacity)
    }

    /// The directory as the process finds it after a kill -9 now: the page cache survives,
    /// so every write, truncation and directory operation made so far is there.
    pub fn kill(&self) -> MemStorage {
        let state = self.lock();
        let files = state.names.iter().map(|(name, inode)| {
            let data = state.inodes.get(inode).map(|file| file.data.clone());
            (name.clone(), data.unwrap_or_default())
        });
        MemStorage::survivor(files, state.capacity)
    }

    /// A fresh storage holding `files`, all of it durable: what a rebooted machine has.
    fn survivor(files: impl Iterator<Item = (String, Vec<u8>)>, capacity: Option<u64>) -> Self {
        let mut state = MemState { capacity, ..MemState::default() };
        for (name, data) in files {
            let file = MemFile { durable_len: data.len(), data, cut_tail: Vec::new() };
            state.inodes.insert(state.next_inode, file);
            state.names.insert(name, state.next_inode);
            state.next_inode += 1;
        }
        state.durable_names = state.names.clone();
        MemStorage { state: Arc::new(Mutex::new(state)) }
    }

    /// Directory operations made since the last `sync_dir`.
    pub fn pending_dir_ops(&self) -> usize {
        self.lock().pending.len()
    }

    /// Inverts every bit of the byte at `offset`, as disk corruption would. The change
    /// reaches the durable copy too when the byte was synced. Returns false (and changes
    /// nothing) when there is no such file or byte.
    pub fn flip_byte(&self, name: &str, offset: u64) -> bool {
        let mut state = self.lock();
        let Some(inode) = state.names.get(name).copied() else {
            return false;
        };
        let Some(file) = state.inodes.get_mut(&inode) else {
            return false;
        };
        match usize::try_from(offset).ok().and_then(|offset| file.data.get_mut(offset)) {
            Some(byte) => {
                *byte = !*byte;
                true
            }
            None => false,
        }
    }

    /// Current length of a file, `None` if there is none.
    pub fn file_len(&self, name: &str) -> Option<u64> {
        let state = self.lock();
        let inode = state.names.get(name)?;
        state.inodes.get(inode).map(|file| file.data.len() as u64)
    }

    /// Bytes of a file known to be on disk (as a prefix of its current contents).
    pub fn synced_len(&self, name: &str) -> Option<u64> {
        let state = self.lock();
        let inode = state.names.get(name)?;
        state.inodes.get(inode).map(|file| file.durable_len as u64)
    }

    /// Current contents of a file, for tests that inspect or compare raw bytes.
    pub fn file_bytes(&self, name: &str) -> Option<Vec<u8>> {
        let state = self.lock();
        let inode = state.names.get(name)?;
        state.inodes.get(inode).map(|file| file.data.clone())
    }

    /// Limits the bytes all files may hold together (`None`: unlimited). An append that
    /// does not fit writes what fits and fails with `StorageFull`, like a short `write`.
    pub fn set_capacity(&self, capacity: Option<u64>) {
        self.lock().capacity = capacity;
    }
}

impl MemState {
    fn file(&self, name: &str) -> io::Result<&MemFile> {
        let inode = self.names.get(name).ok_or_else(|| not_found(name))?;
        self.inodes.get(inode).ok_or_else(|| not_found(name))
    }

    fn file_mut(&mut self, name: &str) -> io::Result<&mut MemFile> {
        let inode = self.names.get(name).ok_or_else(|| not_found(name))?;
        self.inodes.get_mut(inode).ok_or_else(|| not_found(name))
    }

    fn used_bytes(&self) -> u64 {
        let used = self.names.values().filter_map(|inode| self.inodes.get(inode));
        used.map(|file| file.data.len() as u64).sum()
    }
}

impl Storage for MemStorage {
    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.lock().names.keys().cloned().collect())
    }

    fn len(&self, name: &str) -> io::Result<u64> {
        Ok(self.lock().file(name)?.data.len() as u64)
    }

    fn create(&self, name: &str) -> io::Result<()> {
        check_name(name)?;
        let mut state = self.lock();
        if let Ok(file) = state.file_mut(name) {
            file.truncate(0);
            return Ok(());
        }
        let inode = state.next_inode;
        state.next_inode += 1;
        state.inodes.insert(inode, MemFile::default());
        state.names.insert(name.to_string(), inode);
        state.pending.push(DirOp::Create { name: name.to_string(), inode });
        Ok(())
    }

    fn append(&self, name: &str, data: &[u8]) -> io::Result<()> {
        let mut state = self.lock();
        let room = match state.capacity {
            Some(capacity) => capacity.saturating_sub(state.used_bytes()),
            None => u64::MAX,
        };
        let fits = usize::try_from(room).unwrap_or(usize::MAX).min(data.len());
        state.file_mut(name)?.data.extend_from_slice(&data[..fits]);
        if fits < data.len() {
            let message = format!("mem:{name}: no space for {} more bytes", data.len() - fits);
            return Err(io::Error::new(io::ErrorKind::StorageFull, message));
        }
        Ok(())
    }

    fn read_at(&self, name: &str, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let state = self.lock();
        let data = &state.file(name)?.data;
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let end = start.saturating_add(buf.len());
        let Some(source) = data.get(start..end) else {
            let message =
                format!("mem:{name}: read {} bytes at offset {offset} past the end ({})", buf.len(), data.len());
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, message));
        };
        buf.copy_from_slice(source);
        Ok(())
    }

    fn truncate(&self, name: &str, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "length too large"))?;
        self.lock().file_mut(name)?.truncate(len);
        Ok(())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let mut state = self.lock();
        state.names.remove(name).ok_or_else(|| not_found(name))?;
        state.pending.push(DirOp::Remove { name: name.to_string() });
        Ok(())
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        check_name(to)?;
        let mut state = self.lock();
        let inode = state.names.remove(from).ok_or_else(|| not_found(from))?;
        state.names.insert(to.to_string(), inode);
        state.pending.push(DirOp::Rename { from: from.to_string(), to: to.to_string() });
        Ok(())
    }

    fn sync_file(&self, name: &str) -> io::Result<()> {
        let mut state = self.lock();
        let file = state.file_mut(name)?;
        file.durable_len = file.data.len();
        file.cut_tail.clear();
        Ok(())
    }

    fn sync_dir(&self) -> io::Result<()> {
        let mut state = self.lock();
        state.durable_names = state.names.clone();
        state.pending.clear();
        // Inodes no name reaches can no longer come back: free them.
        let live: std::collections::BTreeSet<u64> = state.names.values().copied().collect();
        state.inodes.retain(|inode, _| live.contains(inode));
        Ok(())
    }
}

#[cfg(test)]
#[path = "mem_tests.rs"]
mod tests;
