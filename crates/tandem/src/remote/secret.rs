//! Secrets the `tandem` command takes (a SQL password), in the forms
//! container platforms hand them over: a flag naming a file, the
//! environment variable `NAME`, or `NAME_FILE` naming a file (the Docker
//! secrets convention of the official MariaDB images). Never on the
//! command line itself, where `ps` would show it to every user.

use anyhow::{bail, Context, Result};
use std::path::Path;

/// The secret, if one is given: `flag_file` first, then `NAME` or
/// `NAME_FILE` (both at once is refused: which one was meant?). A file's
/// trailing newline is not part of the secret; an empty secret is refused.
pub fn lookup(name: &str, flag_file: Option<&Path>, env: &dyn Fn(&str) -> Option<String>) -> Result<Option<String>> {
    if let Some(path) = flag_file {
        return read_file(path).map(Some);
    }
    let file_var = format!("{name}_FILE");
    match (env(name), env(&file_var)) {
        (Some(_), Some(_)) => bail!("both {name} and {file_var} are set: unset one"),
        (Some(value), None) if value.is_empty() => bail!("{name} is set but empty"),
        (Some(value), None) => Ok(Some(value)),
        (None, Some(path)) => read_file(Path::new(&path)).with_context(|| format!("{file_var}={path}")).map(Some),
        (None, None) => Ok(None),
    }
}

fn read_file(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading the secret file {}", path.display()))?;
    let secret = text.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t)).unwrap_or(&text);
    if secret.is_empty() {
        bail!("the secret file {} is empty", path.display());
    }
    if let Some(why) = readable_by_others(path) {
        eprintln!("warning: the secret file {} {why}", path.display());
    }
    Ok(secret.to_string())
}

/// A secret any local user can read is not much of a secret: said, not
/// refused (a mounted secret's mode is not always the reader's to choose).
fn readable_by_others(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode();
    (mode & 0o004 != 0).then_some("is readable by every user (chmod o-r)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn the_three_forms_and_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "from-file\n").unwrap();
        let path = file.to_str().unwrap();
        assert_eq!(lookup("T_PW", None, &env(&[])).unwrap(), None);
        assert_eq!(lookup("T_PW", None, &env(&[("T_PW", "plain")])).unwrap().as_deref(), Some("plain"));
        assert_eq!(lookup("T_PW", None, &env(&[("T_PW_FILE", path)])).unwrap().as_deref(), Some("from-file"));
        let flag = lookup("T_PW", Some(&file), &env(&[("T_PW", "ignored")])).unwrap();
        assert_eq!(flag.as_deref(), Some("from-file"), "the flag wins over the environment");
    }

    #[test]
    fn only_one_trailing_newline_goes() {
        let dir = tempfile::tempdir().unwrap();
        for (text, want) in [("a\r\n", "a"), ("a\n\n", "a\n"), ("a b", "a b"), (" a\n", " a")] {
            let file = dir.path().join("pw");
            std::fs::write(&file, text).unwrap();
            assert_eq!(lookup("X", Some(&file), &env(&[])).unwrap().as_deref(), Some(want), "{text:?}");
        }
    }

    #[test]
    fn ambiguous_empty_or_missing_secrets_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let err = |r: Result<Option<String>>| format!("{:#}", r.unwrap_err());
        assert!(err(lookup("P", None, &env(&[("P", "a"), ("P_FILE", "/x")]))).contains("both P and P_FILE"));
        assert!(err(lookup("P", None, &env(&[("P", "")]))).contains("P is set but empty"));
        assert!(err(lookup("P", Some(&empty), &env(&[]))).contains("is empty"));
        let missing = err(lookup("P", None, &env(&[("P_FILE", "/nonexistent/pw")])));
        assert!(missing.contains("P_FILE=/nonexistent/pw") && missing.contains("reading the secret file"), "{missing}");
    }

    #[test]
    fn a_world_readable_file_is_noticed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "s").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(readable_by_others(&file).is_some());
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(readable_by_others(&file).is_none());
    }
}
