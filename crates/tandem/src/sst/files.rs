//! Which files of a data directory a state transfer carries, how they are
//! spread over the streams, and which files a joiner keeps.
//!
//! A member's own replication state is not the donor's to give: the group
//! log (`*galera.cache`, Tandem's and Galera's), `grastate.dat` and
//! `gvwstate.dat` stay with each node, as MariaDB's own SST scripts keep
//! them. So do logs, sockets and pid files. Binary logs are the server's
//! own history, not the data: they are neither sent nor kept, as with the
//! stock mariabackup method.

use std::path::{Component, Path, PathBuf};

/// The joiner receives into this directory inside its data directory and
/// moves the files into place only once every stream has arrived whole.
pub const STAGING: &str = ".tandem_sst";
/// Written by the donor server once `FLUSH TABLES WITH READ LOCK` holds.
pub const TABLES_FLUSHED: &str = "tables_flushed";

/// A file or directory to send, relative to the data directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub size: u64,
    pub mode: u32,
}

/// What a donor found in its data directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inventory {
    pub dirs: Vec<Entry>,
    pub files: Vec<Entry>,
}

impl Inventory {
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// The names of the server's binary log, from `--binlog` / `--binlog-index`
/// (a base name, maybe with a directory): `base.NNNNNN` and the index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Binlog {
    pub base: Option<String>,
    pub index: Option<String>,
}

impl Binlog {
    fn is_binlog(&self, name: &str) -> bool {
        let Some(base) = self.base.as_deref().map(file_name) else { return false };
        let index = self.index.as_deref().map(file_name).map(str::to_string).unwrap_or(format!("{base}.index"));
        name == index
            || name
                .strip_prefix(base)
                .and_then(|r| r.strip_prefix('.'))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Files of the node itself, never part of the data: a joiner keeps its own,
/// a donor never sends its own. Decided on the top-level name.
pub fn is_node_own(name: &str) -> bool {
    name.ends_with("galera.cache")
        || matches!(name, "grastate.dat" | "gvwstate.dat" | STAGING | "sst_in_progress")
        // The server writes these for the SST protocol (via `.tmp` files).
        || name.starts_with(TABLES_FLUSHED)
        || name.starts_with("sst_error")
        || [".err", ".log", ".pid", ".sock", ".sock.lock"].iter().any(|s| name.ends_with(s))
        || name.starts_with("wsrep_recovery.")
        // A joiner's progress, for its own provider.
        || name.starts_with(tandem_health::sst_progress::FILE_NAME)
}

/// Whether the donor sends the top-level entry `name`.
pub fn is_sent(name: &str, binlog: &Binlog) -> bool {
    !is_node_own(name) && !binlog.is_binlog(name)
}

/// Whether a joiner's old top-level entry survives the transfer. Its old
/// binary logs go: they are another history than the data it receives.
pub fn is_kept(name: &str) -> bool {
    is_node_own(name)
}

/// Lists what the donor sends from `datadir`: directories first (parents
/// before children), then regular files. Symbolic links and sockets are
/// refused or skipped: a data directory holding a link (a table in another
/// place) cannot be copied by this method.
pub fn inventory(datadir: &Path, binlog: &Binlog) -> anyhow::Result<Inventory> {
    use std::os::unix::fs::PermissionsExt;
    let mut inv = Inventory::default();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let dir = datadir.join(&rel);
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", dir.display()))?
            .collect::<Result<_, _>>()?;
        names.sort_by_key(|e| e.file_name());
        for entry in names {
            let name = entry.file_name().to_string_lossy().into_owned();
            if rel.as_os_str().is_empty() && !is_sent(&name, binlog) {
                continue;
            }
            let path = rel.join(&name);
            let text = path.to_str().ok_or_else(|| anyhow::anyhow!("{}: not UTF-8", path.display()))?.to_string();
            let meta = std::fs::symlink_metadata(entry.path())?;
            let mode = meta.permissions().mode() & 0o7777;
            if meta.is_dir() {
                inv.dirs.push(Entry { path: text, size: 0, mode });
                todo.push(path);
            } else if meta.is_file() {
                inv.files.push(Entry { path: text, size: meta.len(), mode });
            } else if meta.file_type().is_symlink() {
                anyhow::bail!(
                    "{} is a symbolic link: the tandem SST method copies the data directory's own files only \
                     (use wsrep_sst_method=mariabackup for a data directory with links)",
                    datadir.join(&path).display()
                );
            }
            // Sockets and FIFOs below the top level: not data, skipped.
        }
    }
    inv.dirs.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(inv)
}

/// Spreads files over `streams` so that each carries about the same bytes:
/// largest first, each to the least loaded stream. (Per schema directory, as
/// rsync's method does, one big schema is one stream.)
pub fn balance(files: &[Entry], streams: usize) -> Vec<Vec<Entry>> {
    assert!(streams > 0);
    let mut order: Vec<&Entry> = files.iter().collect();
    order.sort_by(|a, b| b.size.cmp(&a.size).then(a.path.cmp(&b.path)));
    let mut out: Vec<(u64, Vec<Entry>)> = vec![(0, Vec::new()); streams];
    for f in order {
        let least = (0..streams).min_by_key(|&i| (out[i].0, i)).expect("streams > 0");
        out[least].0 += f.size.max(1);
        out[least].1.push(f.clone());
    }
    out.into_iter().map(|(_, v)| v).collect()
}

/// A path from the donor, checked before the joiner writes anything: it
/// must be relative, plain (no `..`, no `.`), and not one of the joiner's
/// own files. A hostile or broken donor cannot write outside the staging
/// directory or replace the joiner's group log.
pub fn checked_path(path: &str) -> Result<PathBuf, String> {
    let p = Path::new(path);
    if path.is_empty() || path.contains('\0') {
        return Err(format!("an empty or invalid path {path:?}"));
    }
    let mut parts = p.components();
    for c in p.components() {
        if !matches!(c, Component::Normal(_)) {
            return Err(format!("the path {path:?} leaves the data directory"));
        }
    }
    let first = parts.next().and_then(|c| c.as_os_str().to_str()).unwrap_or("");
    if is_node_own(first) {
        return Err(format!("the path {path:?} names one of the joiner's own files"));
    }
    Ok(p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, size: u64) -> Entry {
        Entry { path: path.into(), size, mode: 0o660 }
    }

    #[test]
    fn the_nodes_own_state_is_neither_sent_nor_replaced() {
        let binlog = Binlog { base: Some("mysql-bin".into()), index: None };
        for own in [
            "grastate.dat",
            "gvwstate.dat",
            "galera.cache",
            "tandem.galera.cache",
            "mysqld.2.err",
            "ddl_recovery.log",
            "mariadbd.pid",
            "mysql.sock",
            "tables_flushed",
            "tables_flushed.tmp",
            "sst_error",
            STAGING,
            ".tandem_sst_progress",
            ".tandem_sst_progress.tmp",
        ] {
            assert!(!is_sent(own, &binlog), "{own} sent");
            assert!(is_kept(own), "{own} not kept");
        }
        for data in ["ibdata1", "ib_logfile0", "undo001", "mysql", "sbtest", "aria_log.00000001", "ibtmp1"] {
            assert!(is_sent(data, &binlog), "{data} not sent");
            assert!(!is_kept(data), "{data} kept");
        }
    }

    #[test]
    fn binary_logs_are_recognised_by_their_base_name() {
        let binlog = Binlog { base: Some("/var/log/mysql/mysql-bin".into()), index: None };
        assert!(!is_sent("mysql-bin.000001", &binlog));
        assert!(!is_sent("mysql-bin.index", &binlog));
        assert!(is_sent("mysql-bin.000001.bak", &binlog));
        assert!(is_sent("mysql-bin.", &binlog));
        let none = Binlog::default();
        assert!(is_sent("mysql-bin.000001", &none));
        let named = Binlog { base: Some("b".into()), index: Some("idx/list.idx".into()) };
        assert!(!is_sent("list.idx", &named) && is_sent("b.index", &named));
    }

    #[test]
    fn balance_spreads_bytes_and_keeps_every_file_once() {
        let files: Vec<Entry> = (0..20).map(|i| entry(&format!("f{i}"), (i * 37 % 11 + 1) * 1000)).collect();
        for streams in 1..6 {
            let plan = balance(&files, streams);
            assert_eq!(plan.len(), streams);
            let mut all: Vec<String> = plan.iter().flatten().map(|e| e.path.clone()).collect();
            all.sort();
            let mut want: Vec<String> = files.iter().map(|e| e.path.clone()).collect();
            want.sort();
            assert_eq!(all, want);
            let loads: Vec<u64> = plan.iter().map(|s| s.iter().map(|e| e.size).sum()).collect();
            let (lo, hi) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
            assert!(hi - lo <= 11_000, "{loads:?}");
        }
        let one_big = balance(&[entry("big", 1 << 30), entry("a", 10), entry("b", 10)], 2);
        assert_eq!(one_big[0].len(), 1, "the big file has a stream to itself: {one_big:?}");
    }

    #[test]
    fn paths_that_leave_the_directory_or_hit_own_files_are_refused() {
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "./x", "grastate.dat", "x.galera.cache", ".tandem_sst/a"] {
            assert!(checked_path(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["ibdata1", "sbtest/sbtest1.ibd", "mysql/db.MAD", "a/grastate.dat"] {
            assert_eq!(checked_path(good).unwrap(), PathBuf::from(good));
        }
    }

    #[test]
    fn inventory_lists_data_and_leaves_out_own_state() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("sbtest")).unwrap();
        std::fs::create_dir_all(d.join("empty_db")).unwrap();
        std::fs::write(d.join("sbtest/t.ibd"), vec![1u8; 5000]).unwrap();
        std::fs::write(d.join("ibdata1"), vec![2u8; 100]).unwrap();
        std::fs::write(d.join("grastate.dat"), "x").unwrap();
        std::fs::write(d.join("x.galera.cache"), "x").unwrap();
        std::fs::write(d.join("mysql-bin.000003"), "x").unwrap();
        let inv = inventory(d, &Binlog { base: Some("mysql-bin".into()), index: None }).unwrap();
        let dirs: Vec<&str> = inv.dirs.iter().map(|e| e.path.as_str()).collect();
        let files: Vec<(&str, u64)> = inv.files.iter().map(|e| (e.path.as_str(), e.size)).collect();
        assert_eq!(dirs, ["empty_db", "sbtest"]);
        assert_eq!(files.len(), 2);
        assert!(files.contains(&("sbtest/t.ibd", 5000)) && files.contains(&("ibdata1", 100)), "{files:?}");
        assert_eq!(inv.bytes(), 5100);
        std::os::unix::fs::symlink("/tmp", d.join("sbtest/link")).unwrap();
        let err = inventory(d, &Binlog::default()).unwrap_err().to_string();
        assert!(err.contains("symbolic link") && err.contains("mariabackup"), "{err}");
    }
}
