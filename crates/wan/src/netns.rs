//! Network namespaces of our own, by `ip`: commands run in them, and the
//! removal of those a killed run left behind. Shared by the site layouts
//! here and the partition tests' one-bridge network (`tests/cluster`),
//! which differ only in how they name and wire their namespaces.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Runs a command; its output, or its own words when it fails.
pub fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program).args(args).output().with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        bail!("{program} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip -n ns ARGS`.
pub fn ip_in(ns: &str, args: &[&str]) -> Result<()> {
    let mut all = vec!["-n", ns];
    all.extend_from_slice(args);
    run("ip", &all).map(drop)
}

/// `sysctl -w SETTING` inside `ns`.
pub fn sysctl(ns: &str, setting: &str) -> Result<()> {
    run("ip", &["netns", "exec", ns, "sysctl", "-qw", setting]).map(drop)
}

/// `nft COMMAND` inside `ns`.
pub fn nft_in(ns: &str, command: &str) -> Result<()> {
    run("ip", &["netns", "exec", ns, "nft", command]).map(drop)
}

/// Deletes a namespace (and with it its end of each veth pair, and so the pair).
pub fn delete(ns: &str) -> Result<()> {
    run("ip", &["netns", "del", ns]).map(drop)
}

/// Deletes the namespaces whose owner, as `owner_pid` reads it from the
/// name, is no longer running: what a run killed before its drop left.
/// Names `owner_pid` does not recognise are never touched.
pub fn remove_stale(owner_pid: impl Fn(&str) -> Option<u32>) {
    let Ok(list) = run("ip", &["netns", "list"]) else {
        return;
    };
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        if let Some(pid) = owner_pid(name) {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = delete(name);
            }
        }
    }
}

/// The digits `text` starts with, and what follows (None: no digits).
pub fn number_then(text: &str) -> Option<(u64, &str)> {
    let end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    Some((text[..end].parse().ok()?, &text[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_and_its_rest() {
        assert_eq!(number_then("123sw"), Some((123, "sw")));
        assert_eq!(number_then("7"), Some((7, "")));
        assert_eq!(number_then("sw"), None);
        assert_eq!(number_then(""), None);
    }

    #[test]
    fn a_failing_command_says_what_it_ran_and_why() {
        let err = run("ls", &["/no/such/dir/tandem"]).unwrap_err().to_string();
        assert!(err.starts_with("ls /no/such/dir/tandem: "), "{err}");
        assert_eq!(run("echo", &["hi"]).unwrap(), "hi\n");
    }
}
