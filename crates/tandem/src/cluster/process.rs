//! Starting, probing and signalling mariadbd processes by PID.

use anyhow::{Context, Result};
pub use rustix::process::Signal;
use rustix::process::{kill_process, Pid};
use std::fs::OpenOptions;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `program` in its own session (so a Ctrl-C in the CLI's terminal does
/// not reach it), stdout and stderr appended to `log`; in the network
/// namespace `netns` when given (iproute2's `ip netns exec`, which also execs
/// in place, so the PID is still the program's).
pub fn spawn_detached(
    program: &Path,
    args: &[String],
    env: &[(String, String)],
    log: &Path,
    netns: Option<&str>,
) -> Result<Child> {
    let open = || OpenOptions::new().create(true).append(true).open(log);
    let out = open().with_context(|| format!("opening {}", log.display()))?;
    let err = open()?;
    // A new session, as before: `process_group(0)` alone (posix_spawn) made
    // mariadbd exit at start now and then, with an empty error log; not yet
    // understood, so the session stays. util-linux's setsid(1) makes it and
    // execs the program in the same process (our child is no group leader,
    // so it does not fork): the PID is mariadbd's, and no `unsafe` pre_exec
    // hook is needed outside the FFI crate.
    let mut cmd = Command::new("setsid");
    if let Some(ns) = netns {
        cmd.args(["ip", "netns", "exec", ns]);
    }
    cmd.arg(program).args(args).envs(env.iter().cloned()).stdin(Stdio::null()).stdout(out).stderr(err);
    let child = cmd.spawn().with_context(|| format!("starting {}", program.display()))?;
    // Until setsid(1) has exec'd, the PID is not yet the program's, and a
    // check of the process (or a stop) right now would find no mariadbd.
    // Wait for the program's own argv (or for the process to end).
    let program_text = program.display().to_string();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && is_alive(child.id()) {
        if cmdline(child.id()).is_some_and(|c| c.split(' ').next() == Some(program_text.as_str())) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(child)
}

/// True while `pid` exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    !matches!(process_state(&stat), Some('Z') | Some('X') | None)
}

/// The state letter of a `/proc/<pid>/stat` line; the command name may hold spaces and ')'.
pub fn process_state(stat: &str) -> Option<char> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.trim_start().chars().next()
}

/// The process's argv joined by spaces, None when it is gone.
pub fn cmdline(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<String> =
        raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    Some(args.join(" "))
}

/// Guards every signal: the PID must still be a mariadbd started with our
/// options file, not an unrelated process that reused the number.
pub fn is_our_mariadbd(pid: u32, cnf: &Path) -> bool {
    let Some(cmd) = cmdline(pid) else {
        return false;
    };
    is_alive(pid) && cmdline_matches(&cmd, cnf)
}

pub fn cmdline_matches(cmdline: &str, cnf: &Path) -> bool {
    let program = cmdline.split(' ').next().unwrap_or("");
    let defaults = format!("--defaults-file={}", cnf.display());
    program.ends_with("mariadbd") && cmdline.split(' ').any(|a| a == defaults)
}

/// Sends `sig`; a process that is already gone is not an error.
pub fn signal(pid: u32, sig: Signal) -> Result<()> {
    let raw = i32::try_from(pid).context("pid out of range")?;
    let pid_t = Pid::from_raw(raw).context("pid 0 names no process")?;
    match kill_process(pid_t, sig) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(e) => Err(std::io::Error::from(e)).with_context(|| format!("signalling pid {pid}")),
    }
}

/// Polls until `alive()` turns false; `alive` may reap our own children.
pub fn wait_gone(mut alive: impl FnMut() -> bool, timeout: Duration) -> bool {
    let start = Instant::now();
    while alive() {
        if start.elapsed() >= timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    true
}

/// Last `n` lines of a log file, for error messages.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned());
    let Ok(text) = text else {
        return format!("({} is not readable)", path.display());
    };
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The last `n` lines of a log that `keep` selects; empty if none or unreadable.
pub fn tail_matching(path: &Path, n: usize, keep: impl Fn(&str) -> bool) -> String {
    let Ok(bytes) = std::fs::read(path) else {
        return String::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().filter(|l| keep(l)).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_matching_keeps_the_last_selected_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("error.log");
        std::fs::write(&log, "a SST 1\nb\nc SST 2\nd SST 3\n").unwrap();
        assert_eq!(tail_matching(&log, 2, |l| l.contains("SST")), "c SST 2\nd SST 3");
        assert_eq!(tail_matching(&log, 5, |l| l.contains("none")), "");
        assert_eq!(tail_matching(&dir.path().join("missing"), 5, |_| true), "");
    }

    #[test]
    fn stat_state_parsing() {
        assert_eq!(process_state("12 (mariadbd) S 1 2 3"), Some('S'));
        assert_eq!(process_state("12 (a) b)) Z 1"), Some('Z'));
        assert_eq!(process_state("garbage"), None);
    }

    #[test]
    fn self_is_alive_and_not_mariadbd() {
        let me = std::process::id();
        assert!(is_alive(me));
        assert!(!is_our_mariadbd(me, Path::new("/x/my.cnf")));
        assert!(!is_alive(u32::MAX));
    }

    #[test]
    fn cmdline_match_requires_program_and_cnf() {
        let cnf = Path::new("/d/node1/my.cnf");
        assert!(cmdline_matches("/usr/sbin/mariadbd --defaults-file=/d/node1/my.cnf --user=root", cnf));
        assert!(!cmdline_matches("/usr/sbin/mariadbd --defaults-file=/d/node2/my.cnf", cnf));
        assert!(!cmdline_matches("/bin/sleep --defaults-file=/d/node1/my.cnf", cnf));
    }

    #[test]
    fn tail_keeps_last_lines() {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), "a\nb\nc\n").unwrap();
        assert_eq!(tail(tmp.path(), 2), "b\nc");
        assert_eq!(tail(tmp.path(), 10), "a\nb\nc");
    }
}
