//! Talking SQL to a node through the stock `mariadb` client over its socket.
//! A subprocess per query is slow-ish (~10 ms) but adds no heavy dependency
//! and behaves exactly like a user's session.

use anyhow::{anyhow, bail, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Runs `query` as root over `socket`; rows of tab-separated, unescaped fields.
pub fn query(client: &Path, socket: &Path, query: &str, timeout: Duration) -> Result<Vec<Vec<String>>> {
    let target = ["--protocol=socket".to_string(), format!("--socket={}", socket.display()), "--user=root".to_string()];
    query_with(client, &target, None, query, timeout)
}

/// Runs `query` with the client's connection arguments `target` (protocol,
/// address, user). The password, if any, goes in the client's environment
/// (`MYSQL_PWD`): a command line is visible to every local user.
pub fn query_with(
    client: &Path,
    target: &[String],
    password: Option<&str>,
    query: &str,
    timeout: Duration,
) -> Result<Vec<Vec<String>>> {
    let mut cmd = Command::new(client);
    // --no-defaults: /etc/mysql client options must not redirect us elsewhere.
    cmd.arg("--no-defaults")
        .args(target)
        .args(["--batch", "--skip-column-names", "--connect-timeout=5"])
        .arg(format!("--execute={query}"))
        .env_remove("MYSQL_PWD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(password) = password {
        cmd.env("MYSQL_PWD", password);
    }
    let output = run_with_timeout(cmd, timeout)?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        bail!("{}", stderr.trim());
    }
    Ok(parse_batch(&String::from_utf8_lossy(&output.stdout)))
}

/// Waits for the client on a helper thread so a hung server cannot hang us.
fn run_with_timeout(mut cmd: Command, timeout: Duration) -> Result<std::process::Output> {
    let child = cmd.spawn().with_context(|| format!("running {:?}", cmd.get_program()))?;
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(timeout) {
        Ok(output) => Ok(output?),
        Err(_) => {
            // The waiting thread reaps it once it dies.
            super::process::signal(pid, super::process::Signal::KILL)?;
            Err(anyhow!("query timed out after {} s", timeout.as_secs()))
        }
    }
}

/// Splits `--batch` output: rows by newline, fields by tab.
pub fn parse_batch(out: &str) -> Vec<Vec<String>> {
    out.lines().map(|line| line.split('\t').map(unescape).collect()).collect()
}

/// Undoes the client's batch-mode escaping (`\t`, `\n`, `\\`, `\0`).
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('0') => out.push('\0'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// `SHOW STATUS` rows (name, value) as a map; other row shapes are skipped.
pub fn parse_status(rows: &[Vec<String>]) -> BTreeMap<String, String> {
    rows.iter()
        .filter_map(|row| match row.as_slice() {
            [name, value] => Some((name.to_ascii_lowercase(), value.clone())),
            [name] => Some((name.to_ascii_lowercase(), String::new())),
            _ => None,
        })
        .collect()
}

/// Quotes an identifier for SQL (`db`.`table`).
pub fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHOW_STATUS: &str = "wsrep_cluster_size\t3\n\
        wsrep_cluster_status\tPrimary\n\
        wsrep_local_state_comment\tSynced\n\
        wsrep_ready\tON\n\
        wsrep_last_committed\t17\n\
        wsrep_provider_name\tGalera\n\
        wsrep_incoming_addresses\t127.0.0.1:21001,127.0.0.1:21002\n\
        wsrep_cluster_state_uuid\t\n";

    #[test]
    fn status_parsing() {
        let map = parse_status(&parse_batch(SHOW_STATUS));
        assert_eq!(map["wsrep_cluster_size"], "3");
        assert_eq!(map["wsrep_local_state_comment"], "Synced");
        assert_eq!(map["wsrep_incoming_addresses"], "127.0.0.1:21001,127.0.0.1:21002");
        assert_eq!(map["wsrep_cluster_state_uuid"], "");
        assert_eq!(map.len(), 8);
    }

    #[test]
    fn batch_unescaping() {
        let rows = parse_batch("a\\tb\tc\\nd\te\\\\f\n1\tNULL\n");
        assert_eq!(rows, vec![vec!["a\tb", "c\nd", "e\\f"], vec!["1", "NULL"]]);
    }

    #[test]
    fn empty_output_has_no_rows() {
        assert!(parse_batch("").is_empty());
    }

    #[test]
    fn identifiers_are_quoted() {
        assert_eq!(quote_ident("t`x"), "`t``x`");
    }
}
