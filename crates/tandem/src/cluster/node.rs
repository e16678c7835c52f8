//! Per-node operations that need no cluster-wide bookkeeping.

use super::mysql;
use super::prereq::find_program;
use super::process;
use super::state::Node;
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::time::Duration;

/// Generous: a statement may wait for flow control or a TOI on a busy cluster.
pub const SQL_TIMEOUT: Duration = Duration::from_secs(60);

impl Node {
    /// Runs SQL as root over the node's socket; rows of fields (NULL reads "NULL").
    pub fn sql(&self, query: &str) -> Result<Vec<Vec<String>>> {
        self.sql_with_timeout(query, SQL_TIMEOUT)
    }

    pub fn sql_with_timeout(&self, query: &str, timeout: Duration) -> Result<Vec<Vec<String>>> {
        let client = find_program("mariadb")?;
        mysql::query(&client, &self.socket, query, timeout)
            .with_context(|| format!("{}: {}", self.name, abbreviate(query)))
    }

    /// One `SHOW GLOBAL STATUS` value, e.g. `status("wsrep_cluster_size")`.
    pub fn status(&self, var: &str) -> Result<String> {
        let map = self.statuses(var)?;
        let value = map.get(&var.to_ascii_lowercase()).cloned();
        value.with_context(|| format!("{}: no status variable {var}", self.name))
    }

    /// All `SHOW GLOBAL STATUS LIKE pattern` values, names lower-cased.
    pub fn statuses(&self, pattern: &str) -> Result<BTreeMap<String, String>> {
        let query = format!("SHOW GLOBAL STATUS LIKE '{}'", pattern.replace('\'', "''"));
        Ok(mysql::parse_status(&self.sql(&query)?))
    }

    /// True while the recorded PID is still this node's mariadbd.
    pub fn is_running(&self) -> bool {
        self.pid.is_some_and(|pid| process::is_our_mariadbd(pid, &self.cnf))
    }

    /// `wsrep_local_state_comment`, or None when the server does not answer yet.
    pub fn probe_state(&self) -> Option<String> {
        let query = "SHOW GLOBAL STATUS LIKE 'wsrep_local_state_comment'";
        let rows = self.sql_with_timeout(query, Duration::from_secs(10)).ok()?;
        mysql::parse_status(&rows).remove("wsrep_local_state_comment")
    }

    /// A standalone server's stand-in for `probe_state`: "Synced" once it answers.
    pub fn probe_ready(&self) -> Option<String> {
        let rows = self.sql_with_timeout("SELECT 1", Duration::from_secs(10)).ok()?;
        (rows == [["1"]]).then(|| "Synced".to_string())
    }

    /// How a human connects to this node.
    pub fn connect_hint(&self) -> String {
        format!(
            "{}: mariadb -S {} -uroot    |    mariadb -h127.0.0.1 -P{} -uroot",
            self.name,
            self.socket.display(),
            self.sql_port
        )
    }
}

/// Keeps error messages readable when the query is a bulk insert.
fn abbreviate(query: &str) -> String {
    const MAX: usize = 120;
    match query.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &query[..cut]),
        None => query.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_queries_are_abbreviated() {
        assert_eq!(abbreviate("select 1"), "select 1");
        let long = "x".repeat(500);
        assert_eq!(abbreviate(&long).len(), 123);
    }
}
