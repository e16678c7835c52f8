//! Small named files replaced atomically: the vote, the committed log id, the member
//! identity, state-machine checkpoints.
//!
//! A write goes to `<name>.tmp`, is optionally fsynced, renamed over `<name>`, and the
//! directory optionally fsynced. So a reader sees the old value or the new one; after a crash
//! without `sync` it may also see a torn new one, which the frame's checksum turns into an
//! error (see [`crate::format`] for the frame). Blobs may share a storage with segment logs;
//! keep their names apart from the segment pattern (`<log>.<20 digits>.seg`).
//!
//! One writer per name at a time: two concurrent writers of one name share its temp file.

use crate::error::LogError;
use crate::format::{self, BLOB_HEADER_LEN, MAX_PAYLOAD};
use crate::storage::{self, Storage};
use std::io;

/// Suffix of the temporary file a blob is written to before its rename. Such names are not
/// blobs: `list_blobs` skips them and `write_blob` refuses them.
pub const TEMP_SUFFIX: &str = ".tmp";

fn check_blob_name(name: &str) -> Result<(), LogError> {
    storage::check_name(name)?;
    if name.ends_with(TEMP_SUFFIX) {
        let message = format!("blob name {name:?} ends with the temp suffix {TEMP_SUFFIX:?}");
        return Err(io::Error::new(io::ErrorKind::InvalidInput, message).into());
    }
    Ok(())
}

/// Replaces blob `name` with `bytes`: write temp, optional fsync, rename, optional dir fsync.
/// With `sync`, the new value is durable when this returns.
pub fn write_blob<S: Storage>(storage: &S, name: &str, bytes: &[u8], sync: bool) -> Result<(), LogError> {
    check_blob_name(name)?;
    if bytes.len() > MAX_PAYLOAD {
        return Err(LogError::TooLarge(bytes.len()));
    }
    let temp = format!("{name}{TEMP_SUFFIX}");
    // A temp file left by a write that crashed before its rename may hold a whole, valid
    // frame of a value that was never stored. Emptying it in place would be a truncation a
    // crash can undo after the rename persisted, resurrecting that value; a new file cannot.
    match storage.remove(&temp) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error.into()),
        _ => {}
    }
    storage.create(&temp)?;
    storage.append(&temp, &format::encode_blob(bytes))?;
    if sync {
        storage.sync_file(&temp)?;
    }
    storage.rename(&temp, name)?;
    if sync {
        storage.sync_dir()?;
    }
    Ok(())
}

/// Blob `name`: `Ok(None)` when missing; `Err(LogError::Corrupt { index: 0, .. })` when
/// damaged (torn, flipped, or not a blob at all). Never returns altered bytes.
pub fn read_blob<S: Storage>(storage: &S, name: &str) -> Result<Option<Vec<u8>>, LogError> {
    check_blob_name(name)?;
    let len = match storage.len(name) {
        Ok(len) => len,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    // The file's own length bounds the allocation, and is checked before it.
    if len > (BLOB_HEADER_LEN + MAX_PAYLOAD) as u64 {
        let reason = format!("blob {name}: file of {len} bytes is larger than any blob");
        return Err(LogError::Corrupt { index: 0, reason });
    }
    let mut file = vec![0u8; len as usize];
    match storage.read_at(name, 0, &mut file) {
        Ok(()) => {}
        // Removed between the length and the read: as if it had been missing.
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error.into()),
    }
    match format::decode_blob(&file) {
        Ok(payload) => Ok(Some(payload.to_vec())),
        Err(invalid) => Err(LogError::Corrupt { index: 0, reason: format!("blob {name}: {invalid}") }),
    }
}

/// Removes blob `name` (no error if missing), durably: a removed vote or checkpoint must not
/// come back after a crash.
pub fn remove_blob<S: Storage>(storage: &S, name: &str) -> Result<(), LogError> {
    check_blob_name(name)?;
    match storage.remove(name) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error.into()),
    }
    storage.sync_dir()?;
    Ok(())
}

/// Names of blobs starting with `prefix`, sorted. Temp files of unfinished writes are not
/// blobs and are skipped.
pub fn list_blobs<S: Storage>(storage: &S, prefix: &str) -> Result<Vec<String>, LogError> {
    let mut names: Vec<String> =
        storage.list()?.into_iter().filter(|name| name.starts_with(prefix) && !name.ends_with(TEMP_SUFFIX)).collect();
    names.sort();
    Ok(names)
}

#[cfg(test)]
#[path = "blob_tests.rs"]
mod tests;
