//! `--basedir DIR`: run MariaDB, Galera and sysbench from a relocated tree
//! (`../shared/tools/relocatable-bundle.sh` packs one from this machine's
//! Debian packages) instead of the installed ones, e.g. on a larger machine
//! without package access.
//!
//! The tree's programs need its libraries and sysbench its Lua scripts, and
//! every program we start (mariadbd, its SST script, mariabackup, socat, the
//! client, sysbench) must find them. Rather than threading an environment
//! through every place that starts a process, `tandem` starts itself again
//! once with that environment, so everything it starts inherits it.
//! What a program cannot find through the environment is passed explicitly:
//! the server's directories (`options`), `mariadb-install-db --basedir`, the
//! Galera library and sysbench's scripts.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// Set in the environment of the re-started `tandem` (and so of everything
/// it starts): the relocated tree in use.
pub const ENV: &str = "TANDEM_BASEDIR";

/// The relocated tree in use, if any.
pub fn current() -> Option<PathBuf> {
    std::env::var_os(ENV).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// What a relocated tree must hold, checked before anything starts.
pub fn check(dir: &Path) -> Result<PathBuf> {
    let dir = std::path::absolute(dir).with_context(|| format!("--basedir {}", dir.display()))?;
    for needed in
        ["bin/mariadbd", "bin/mariadb", "bin/mariadb-install-db", "lib/libgalera_smm.so", "share/mysql/charsets"]
    {
        if !dir.join(needed).exists() {
            bail!(
                "--basedir {}: no {needed} there (a tree unpacked from ../shared/tools/relocatable-bundle.sh has it)",
                dir.display()
            );
        }
    }
    Ok(dir)
}

/// The environment everything runs with: the tree's programs first on
/// PATH, its libraries, sysbench's Lua modules.
pub fn environment(dir: &Path, path: Option<&std::ffi::OsStr>) -> Vec<(String, std::ffi::OsString)> {
    let mut search = vec![dir.join("bin"), dir.join("sbin")];
    search.extend(path.map(|p| std::env::split_paths(p).collect::<Vec<_>>()).unwrap_or_default());
    let joined = std::env::join_paths(search).unwrap_or_default();
    vec![
        (ENV.to_string(), dir.as_os_str().to_owned()),
        ("PATH".to_string(), joined),
        ("LD_LIBRARY_PATH".to_string(), dir.join("lib").into_os_string()),
        ("LUA_PATH".to_string(), format!("{}/?.lua;;", dir.join("share/sysbench").display()).into()),
    ]
}

/// Starts this `tandem` again with the tree's environment; returns only on
/// failure (or when it is already running with it).
pub fn reexec_with(dir: &Path) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let dir = check(dir)?;
    if current().as_deref() == Some(dir.as_path()) {
        return Ok(());
    }
    let exe = std::env::current_exe().context("finding the tandem executable")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(std::env::args_os().skip(1));
    for (k, v) in environment(&dir, std::env::var_os("PATH").as_deref()) {
        cmd.env(k, v);
    }
    let err = cmd.exec();
    bail!("could not start tandem again with --basedir {}: {err}", dir.display())
}

/// The server's own directories inside the tree (its compiled-in ones are
/// under /usr).
pub fn server_options(dir: &Path) -> Vec<(String, String)> {
    let p = |sub: &str| dir.join(sub).display().to_string();
    vec![
        ("basedir".into(), dir.display().to_string()),
        ("lc_messages_dir".into(), p("share/mysql")),
        ("character_sets_dir".into(), p("share/mysql/charsets")),
        ("plugin_dir".into(), p("lib/plugin")),
    ]
}

/// Galera's library in the tree.
pub fn galera(dir: &Path) -> PathBuf {
    dir.join("lib/libgalera_smm.so")
}

/// A sysbench script by name: its path in the tree (sysbench looks for bare
/// names in its compiled-in /usr/share/sysbench).
pub fn sysbench_script(name: &str) -> String {
    match current() {
        Some(dir) => dir.join("share/sysbench").join(format!("{name}.lua")).display().to_string(),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        for f in ["bin/mariadbd", "bin/mariadb", "bin/mariadb-install-db", "lib/libgalera_smm.so"] {
            std::fs::create_dir_all(t.path().join(f).parent().unwrap()).unwrap();
            std::fs::write(t.path().join(f), b"").unwrap();
        }
        std::fs::create_dir_all(t.path().join("share/mysql/charsets")).unwrap();
        t
    }

    #[test]
    fn a_tree_is_checked_and_its_environment_puts_it_first() {
        let t = tree();
        let dir = check(t.path()).unwrap();
        let env = environment(&dir, Some(std::ffi::OsStr::new("/usr/bin:/bin")));
        let get = |k: &str| env.iter().find(|(n, _)| n == k).unwrap().1.to_string_lossy().into_owned();
        assert_eq!(get("PATH"), format!("{0}/bin:{0}/sbin:/usr/bin:/bin", dir.display()));
        assert_eq!(get("LD_LIBRARY_PATH"), format!("{}/lib", dir.display()));
        assert_eq!(get("LUA_PATH"), format!("{}/share/sysbench/?.lua;;", dir.display()));
        assert_eq!(get(ENV), dir.display().to_string());
        let opts = server_options(&dir);
        assert!(opts.contains(&("plugin_dir".into(), format!("{}/lib/plugin", dir.display()))));
        assert_eq!(galera(&dir), dir.join("lib/libgalera_smm.so"));
    }

    #[test]
    fn a_tree_without_the_server_is_refused_naming_what_is_missing() {
        let t = tree();
        std::fs::remove_file(t.path().join("bin/mariadbd")).unwrap();
        let err = check(t.path()).unwrap_err().to_string();
        assert!(err.contains("no bin/mariadbd there"), "{err}");
    }
}
