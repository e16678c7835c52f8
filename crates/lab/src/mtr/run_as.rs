//! `tandem-lab mtr --run-as USER`: MTR and every server it starts run as USER.
//!
//! MariaDB's own CI runs MTR as an ordinary user, and some galera tests rely
//! on it: they exec `$MYSQLD --wsrep-recover` themselves, without the
//! `--user=root` that MTR adds to the servers it starts, and mariadbd refuses
//! to run as root without it. As root those tests fail with either provider;
//! as an ordinary user they test the provider (tests/mtr/durability.txt).

use anyhow::{anyhow, bail, Context, Result};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

/// An existing account, by name and ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunAs {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl RunAs {
    /// Looks the account up with `id` (no libc call: `unsafe` stays in the
    /// provider crate).
    pub fn lookup(name: &str) -> Result<RunAs> {
        if name.is_empty() || name.starts_with('-') {
            bail!("--run-as {name:?}: not a user name");
        }
        let uid = id_number(name, "-u")?;
        let gid = id_number(name, "-g")?;
        if uid == 0 {
            bail!("--run-as {name}: that is root; name an ordinary user (for example nobody)");
        }
        Ok(RunAs { name: name.to_string(), uid, gid })
    }

    /// Makes `out` (the run's own directory) the user's: MTR writes its
    /// vardir and report there. Its parents must already let others through.
    pub fn prepare_dir(&self, out: &Path) -> Result<()> {
        check_traversable(out)?;
        chown_tree(out, self.uid, self.gid)
    }

    /// The command runs as the user, under the user's name (HOME stays the
    /// caller's: MTR does not use it, and `nobody` has none).
    pub fn apply(&self, cmd: &mut Command) {
        use std::os::unix::process::CommandExt;
        cmd.uid(self.uid).gid(self.gid).env("USER", &self.name).env("LOGNAME", &self.name);
    }
}

fn id_number(name: &str, flag: &str) -> Result<u32> {
    let out = Command::new("id").arg(flag).arg(name).output().context("cannot run id")?;
    if !out.status.success() {
        bail!("--run-as {name}: no such user ({})", String::from_utf8_lossy(&out.stderr).trim());
    }
    parse_id(&String::from_utf8_lossy(&out.stdout))
        .ok_or_else(|| anyhow!("--run-as {name}: id {flag} printed no number"))
}

pub fn parse_id(text: &str) -> Option<u32> {
    text.trim().parse().ok()
}

/// Every parent of `dir` must let others search it, or MTR, running as the
/// user, cannot reach its own vardir. Say which one does not, rather than
/// changing a directory the run does not own.
fn check_traversable(dir: &Path) -> Result<()> {
    for parent in dir.ancestors().skip(1) {
        if parent.as_os_str().is_empty() {
            continue;
        }
        let meta = std::fs::metadata(parent).with_context(|| format!("cannot stat {}", parent.display()))?;
        if meta.mode() & 0o001 == 0 {
            bail!(
                "--run-as: {} is not searchable by other users (mode {:o}); choose an --out under a directory \
                 they can reach, or chmod o+x it",
                parent.display(),
                meta.mode() & 0o7777
            );
        }
    }
    Ok(())
}

fn chown_tree(path: &Path, uid: u32, gid: u32) -> Result<()> {
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).with_context(|| format!("cannot chown {}", path.display()))?;
    let meta = std::fs::symlink_metadata(path)?;
    if meta.is_dir() {
        // A fresh temp dir is 0700: the user owns it now, which is enough.
        for entry in std::fs::read_dir(path).with_context(|| format!("cannot read {}", path.display()))? {
            chown_tree(&entry?.path(), uid, gid)?;
        }
    } else if meta.is_file() && meta.permissions().mode() & 0o444 != 0o444 {
        let mut perms = meta.permissions();
        perms.set_mode(perms.mode() | 0o444);
        std::fs::set_permissions(path, perms)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_output_is_read_as_a_number() {
        assert_eq!(parse_id("65534\n"), Some(65534));
        assert_eq!(parse_id(""), None);
        assert_eq!(parse_id("nobody"), None);
    }

    #[test]
    fn root_and_option_like_names_are_refused() {
        let err = RunAs::lookup("root").unwrap_err().to_string();
        assert!(err.contains("that is root"), "{err}");
        let err = RunAs::lookup("--help").unwrap_err().to_string();
        assert!(err.contains("not a user name"), "{err}");
        let err = RunAs::lookup("no-such-user-tandem").unwrap_err().to_string();
        assert!(err.contains("no such user"), "{err}");
    }

    #[test]
    fn a_parent_closed_to_others_is_named() {
        let base = tempfile::tempdir().unwrap();
        let closed = base.path().join("closed");
        std::fs::create_dir(&closed).unwrap();
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
        let inner = closed.join("out");
        std::fs::create_dir(&inner).unwrap();
        let err = check_traversable(&inner).unwrap_err().to_string();
        // The tempdir itself may be 0700 too; whichever comes first is named.
        assert!(err.contains("not searchable by other users"), "{err}");
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn the_tree_changes_owner_and_files_become_readable() {
        let base = tempfile::tempdir().unwrap();
        let file = base.path().join("lib.so");
        std::fs::write(&file, b"x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let me = std::fs::metadata(base.path()).unwrap();
        chown_tree(base.path(), me.uid(), me.gid()).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o444, 0o444);
    }
}
