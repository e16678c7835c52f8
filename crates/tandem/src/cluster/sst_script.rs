//! `wsrep_sst_method=tandem` for the nodes of a `tandem cluster`: the
//! shipped `wsrep_sst_tandem` script, put first on each node's PATH
//! (mariadbd runs `wsrep_sst_<method>` from its PATH). An installed
//! `tandem` (the package's /usr/bin) has the script beside it, and the
//! nodes run that one; a `tandem` from a build tree has none, so a copy is
//! written into the cluster's `bin/`.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The script, as shipped in `packaging/sst`.
pub const SCRIPT: &str = include_str!("../../../../packaging/sst/wsrep_sst_tandem");

/// Returns the PATH to give the node: first the directory of the script
/// (the one installed beside `tandem`, else a copy written into `dir/bin`
/// and pointed at `tandem`), then the PATH it would have had.
pub fn path_with_script(dir: &Path, tandem: &Path, env: &[(String, String)]) -> Result<String> {
    let bin = match tandem.parent().filter(|d| d.join("wsrep_sst_tandem").is_file()) {
        Some(installed) => installed.to_path_buf(),
        None => write_script(dir, tandem)?,
    };
    let inherited = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_else(|| "/usr/bin:/bin".to_string());
    Ok(format!("{}:{inherited}", bin.display()))
}

/// Writes the script into `dir/bin`, pointed at `tandem`; returns `dir/bin`.
fn write_script(dir: &Path, tandem: &Path) -> Result<PathBuf> {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin)?;
    let script = SCRIPT.replacen("\n", &format!("\nTANDEM='{}'\n", tandem.display()), 1);
    let path = bin.join("wsrep_sst_tandem");
    std::fs::write(&path, script).with_context(|| format!("writing {}", path.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(bin)
}

/// The `tandem` binary that `wsrep_sst_tandem` runs: `$TANDEM_BIN`, this
/// process when it is `tandem`, else the `tandem` that cargo built beside
/// this program (`tandem-lab`, or a test binary in `target/<profile>/deps/`).
/// None: nodes cannot use `wsrep_sst_method=tandem`, and their server says so.
pub fn tandem_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TANDEM_BIN") {
        return Some(PathBuf::from(path));
    }
    let me = std::env::current_exe().ok()?;
    if me.file_name().is_some_and(|n| n == "tandem") {
        return Some(me);
    }
    let dir = me.parent()?;
    [dir.join("tandem"), dir.parent()?.join("tandem")].into_iter().find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_runs_the_named_binary_and_comes_first_on_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let env = [("PATH".to_string(), "/opt/x/bin:/usr/bin".to_string())];
        let path = path_with_script(dir.path(), Path::new("/t/tandem"), &env).unwrap();
        assert_eq!(path, format!("{}/bin:/opt/x/bin:/usr/bin", dir.path().display()));
        let script = std::fs::read_to_string(dir.path().join("bin/wsrep_sst_tandem")).unwrap();
        assert!(script.starts_with("#!/bin/sh\nTANDEM='/t/tandem'\n"), "{script}");
        assert!(script.trim_end().ends_with("exec \"$TANDEM\" sst \"$@\""), "{script}");
    }

    #[test]
    fn an_installed_script_beside_tandem_is_used_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let installed = tempfile::tempdir().unwrap();
        let script = installed.path().join("wsrep_sst_tandem");
        std::fs::write(&script, SCRIPT).unwrap();
        let env = [("PATH".to_string(), "/usr/bin".to_string())];
        let path = path_with_script(dir.path(), &installed.path().join("tandem"), &env).unwrap();
        assert_eq!(path, format!("{}:/usr/bin", installed.path().display()));
        assert!(!dir.path().join("bin").exists(), "no copy is written");
        assert_eq!(std::fs::read_to_string(&script).unwrap(), SCRIPT, "the installed script is left alone");
    }
}
