//! Finding the MariaDB programs and the provider library, with messages that
//! tell the user what to install rather than a backtrace.

use super::state::ProviderKind;
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

pub const GALERA_PROVIDER: &str = "/usr/lib/galera/libgalera_smm.so";
pub const PROVIDER_ENV: &str = "TANDEM_PROVIDER";
/// What a standalone server records as its provider (mariadbd's own word for none).
pub const NO_PROVIDER: &str = "none";

/// Absolute paths of the programs a cluster needs.
#[derive(Clone, Debug)]
pub struct Tools {
    pub mariadbd: PathBuf,
    pub install_db: PathBuf,
    pub client: PathBuf,
}

impl Tools {
    /// mariabackup and socat are run by mariadbd's SST script, so they are
    /// checked here too: a missing one would only show up as a hung joiner.
    pub fn find() -> Result<Tools> {
        let tools = Tools {
            mariadbd: find_program("mariadbd")?,
            install_db: find_program("mariadb-install-db")?,
            client: find_program("mariadb")?,
        };
        // MariaDB's SST script runs `mariadb-backup`; `mariabackup` is the
        // old name, kept as a link by the Debian package but absent from a
        // relocated tree (../shared/tools/relocatable-bundle.sh).
        find_program("mariadb-backup").or_else(|_| find_program("mariabackup"))?;
        find_program("socat")?;
        Ok(tools)
    }
}

/// Looks in PATH, then in the sbin directories a non-login root PATH may lack.
pub fn find_program(name: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let extra = ["/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin"].map(PathBuf::from);
    let found =
        std::env::split_paths(&path).chain(extra).map(|dir| dir.join(name)).find(|candidate| is_executable(candidate));
    match found {
        Some(program) => Ok(program),
        None => bail!("{name} not found: run make deps"),
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// The library mariadbd will load: explicit path, else $TANDEM_PROVIDER (tandem
/// only), else the release build in this workspace / the Galera package file.
pub fn resolve_provider(kind: ProviderKind, explicit: Option<&Path>) -> Result<PathBuf> {
    let env = std::env::var_os(PROVIDER_ENV).filter(|v| !v.is_empty()).map(PathBuf::from);
    let chosen = match (kind, explicit, env) {
        (_, Some(path), _) => path.to_path_buf(),
        (ProviderKind::Tandem, None, Some(path)) => path,
        (ProviderKind::Tandem, None, None) => default_tandem_provider()?,
        (ProviderKind::Null, None, _) => default_null_provider()?,
        (ProviderKind::Galera, None, _) => {
            crate::basedir::current().map_or_else(|| PathBuf::from(GALERA_PROVIDER), |dir| crate::basedir::galera(&dir))
        }
        (ProviderKind::Standalone, None, _) => return Ok(PathBuf::from(NO_PROVIDER)),
    };
    check_provider_file(kind, &chosen)
}

fn default_tandem_provider() -> Result<PathBuf> {
    let Some(root) = workspace_root() else {
        bail!("cannot find the tandem workspace: pass --provider-path or set {PROVIDER_ENV}")
    };
    Ok(root.join("target/release/libtandem.so"))
}

/// The null provider is a development build's only (`make build`): it has
/// no package and no environment variable of its own.
fn default_null_provider() -> Result<PathBuf> {
    let Some(root) = workspace_root() else {
        bail!("cannot find the tandem workspace for the null provider: pass --provider-path")
    };
    Ok(root.join("target/release/libtandem_null.so"))
}

fn check_provider_file(kind: ProviderKind, path: &Path) -> Result<PathBuf> {
    if path.is_file() {
        // Absolute (mariadbd's cwd is not ours), but symlinks kept: the path
        // shown is the one the user gave.
        return Ok(std::path::absolute(path)?);
    }
    match kind {
        ProviderKind::Standalone => {
            bail!("a standalone server loads no provider ({})", path.display())
        }
        ProviderKind::Galera => bail!("{} not found: run make deps (galera-4)", path.display()),
        ProviderKind::Tandem => bail!(
            "{} not found: build it with `cargo build --release -p tandem-provider`, \
             or pass --provider-path / set {PROVIDER_ENV}",
            path.display()
        ),
        ProviderKind::Null => bail!(
            "{} not found: build it with `make build` (or `cargo build --release -p tandem-null-provider`), \
             or pass --provider-path",
            path.display()
        ),
    }
}

/// The workspace holding this executable (target/<profile>/tandem), else the cwd's.
pub fn workspace_root() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok();
    let cwd = std::env::current_dir().ok();
    [exe, cwd].into_iter().flatten().find_map(|start| find_workspace_above(&start))
}

pub fn find_workspace_above(start: &Path) -> Option<PathBuf> {
    start.ancestors().find(|dir| is_workspace(dir)).map(Path::to_path_buf)
}

fn is_workspace(dir: &Path) -> bool {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
    manifest.lines().any(|line| line.trim() == "[workspace]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_program_says_make_deps() {
        let err = find_program("definitely-not-a-program-xyz").unwrap_err();
        assert_eq!(err.to_string(), "definitely-not-a-program-xyz not found: run make deps");
    }

    #[test]
    fn workspace_is_found_from_a_nested_path() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("Cargo.toml"), "[workspace]\nmembers = []\n").unwrap();
        let nested = tmp.path().join("target/debug");
        std::fs::create_dir_all(&nested).unwrap();
        assert_eq!(find_workspace_above(&nested.join("tandem")).unwrap(), tmp.path());
    }

    #[test]
    fn explicit_missing_provider_is_a_clear_error() {
        let err = resolve_provider(ProviderKind::Tandem, Some(Path::new("/nope/lib.so"))).unwrap_err();
        assert!(err.to_string().contains("cargo build --release -p tandem-provider"), "{err}");
        let err = resolve_provider(ProviderKind::Null, Some(Path::new("/nope/lib.so"))).unwrap_err();
        assert!(err.to_string().contains("make build"), "{err}");
    }

    #[test]
    fn the_null_provider_is_the_workspace_build_next_to_libtandem() {
        let path = default_null_provider().unwrap();
        assert!(path.ends_with("target/release/libtandem_null.so"), "{}", path.display());
    }
}
