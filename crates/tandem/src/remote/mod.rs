//! Nodes of a real cluster, reached by address (or by a local socket) over
//! SQL with the stock `mariadb` client: what `tandem cluster status
//! --remote` shows, and what `tandem node wait-synced` waits for (a systemd
//! `ExecStartPost`, so that a rolling restart never takes down a second
//! node while the first is still catching up).

pub mod bootstrap;
pub mod check;
pub mod position;
pub mod secret;

use crate::cluster::mysql;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The password's environment variable; `TANDEM_PASSWORD_FILE` names a
/// file holding it (see [`secret`]).
pub const PASSWORD_ENV: &str = "TANDEM_PASSWORD";
const DEFAULT_PORT: u16 = 3306;
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a node's SQL is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Tcp { host: String, port: u16 },
    Socket(PathBuf),
}

impl Endpoint {
    /// `host`, `host:port`, `[ipv6]:port`, or a socket path (`/...`).
    pub fn parse(text: &str) -> Result<Endpoint> {
        let t = text.trim();
        if t.starts_with('/') {
            return Ok(Endpoint::Socket(PathBuf::from(t)));
        }
        let (host, port) = if let Some(rest) = t.strip_prefix('[') {
            let (host, after) = rest.split_once(']').with_context(|| format!("{text:?}: no closing ]"))?;
            (host, after.strip_prefix(':'))
        } else if t.matches(':').count() > 1 {
            (t, None) // a bare IPv6 address
        } else {
            match t.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (t, None),
            }
        };
        if host.is_empty() {
            bail!("{text:?}: no host");
        }
        let port = match port {
            None => DEFAULT_PORT,
            Some(p) => p.parse().ok().filter(|p| *p > 0).with_context(|| format!("{text:?}: bad port {p:?}"))?,
        };
        Ok(Endpoint::Tcp { host: host.to_string(), port })
    }

    fn client_args(&self) -> Vec<String> {
        match self {
            Endpoint::Tcp { host, port } => {
                vec!["--protocol=tcp".into(), format!("--host={host}"), format!("--port={port}")]
            }
            Endpoint::Socket(path) => vec!["--protocol=socket".into(), format!("--socket={}", path.display())],
        }
    }

    pub fn label(&self) -> String {
        match self {
            Endpoint::Tcp { host, port } if host.contains(':') => format!("[{host}]:{port}"),
            Endpoint::Tcp { host, port } => format!("{host}:{port}"),
            Endpoint::Socket(path) => path.display().to_string(),
        }
    }
}

/// Who we are to the server. No user: the client's default (the login
/// name, which on a Debian server's socket is root by unix_socket).
#[derive(Clone, Debug, Default)]
pub struct Login {
    pub user: Option<String>,
    password: Option<String>,
}

impl Login {
    /// `--user`, and the password from `--password-file`,
    /// `TANDEM_PASSWORD` or `TANDEM_PASSWORD_FILE`.
    pub fn from_cli(user: Option<String>, password_file: Option<&Path>) -> Result<Login> {
        let password = secret::lookup(PASSWORD_ENV, password_file, &|k| std::env::var(k).ok())?;
        Ok(Login { user, password })
    }
}

/// `SHOW GLOBAL STATUS LIKE 'wsrep%'` of one node. The password goes to
/// the client in its environment (`MYSQL_PWD`), never on a command line.
pub fn statuses(client: &Path, at: &Endpoint, login: &Login) -> Result<BTreeMap<String, String>> {
    let mut args = at.client_args();
    if let Some(user) = &login.user {
        args.push(format!("--user={user}"));
    }
    let rows =
        mysql::query_with(client, &args, login.password.as_deref(), "SHOW GLOBAL STATUS LIKE 'wsrep%'", QUERY_TIMEOUT)
            .with_context(|| at.label())?;
    Ok(mysql::parse_status(&rows))
}

/// Runs one statement on a node (a `SET GLOBAL`), as [`statuses`] logs in.
pub fn execute(client: &Path, at: &Endpoint, login: &Login, statement: &str) -> Result<()> {
    let mut args = at.client_args();
    if let Some(user) = &login.user {
        args.push(format!("--user={user}"));
    }
    mysql::query_with(client, &args, login.password.as_deref(), statement, QUERY_TIMEOUT)
        .with_context(|| at.label())?;
    Ok(())
}

/// Whether a node may take traffic and let the next one go down.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    Synced,
    /// No provider loaded (`wsrep_on=OFF`, `wsrep_provider=none`): a server
    /// on its own, nothing to wait for.
    NotReplicating,
    /// Joining, receiving a state transfer, catching up, donating, or not
    /// in a primary component: what the node says.
    NotYet(String),
}

pub fn readiness(status: &BTreeMap<String, String>) -> Readiness {
    let get = |k: &str| status.get(k).map(String::as_str).unwrap_or("?");
    if matches!(get("wsrep_provider_name"), "" | "?") && matches!(get("wsrep_cluster_status"), "Disconnected" | "?") {
        return Readiness::NotReplicating;
    }
    match (get("wsrep_local_state_comment"), get("wsrep_cluster_status")) {
        ("Synced", "Primary") => Readiness::Synced,
        (state, cluster) => Readiness::NotYet(format!("{state}, {cluster}")),
    }
}

/// Waits until the node at `at` is Synced in a primary component. A node
/// that does not answer yet (its server still starting, a state transfer
/// under way) is waited for too; `timeout` bounds it all (none: forever,
/// as under systemd, whose start timeout then decides).
pub fn wait_synced(client: &Path, at: &Endpoint, login: &Login, timeout: Option<Duration>) -> Result<Duration> {
    let started = Instant::now();
    let mut last_said = String::new();
    loop {
        let now = match statuses(client, at, login) {
            Ok(status) => match readiness(&status) {
                Readiness::Synced => return Ok(started.elapsed()),
                Readiness::NotReplicating => {
                    eprintln!("{}: no wsrep provider loaded: nothing to wait for", at.label());
                    return Ok(started.elapsed());
                }
                Readiness::NotYet(why) => why,
            },
            Err(e) => format!("no answer ({})", one_line(&format!("{e:#}"))),
        };
        if now != last_said {
            eprintln!("{}: {now} after {:.0} s", at.label(), started.elapsed().as_secs_f64());
            last_said = now;
        }
        if timeout.is_some_and(|t| started.elapsed() >= t) {
            bail!("{} is not Synced after {} s: {last_said}", at.label(), started.elapsed().as_secs());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn one_line(text: &str) -> String {
    text.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_as_a_dba_writes_them() {
        let tcp = |h: &str, p| Endpoint::Tcp { host: h.into(), port: p };
        assert_eq!(Endpoint::parse("db1").unwrap(), tcp("db1", 3306));
        assert_eq!(Endpoint::parse("10.0.0.2:3307").unwrap(), tcp("10.0.0.2", 3307));
        assert_eq!(Endpoint::parse("[fd00::2]:3307").unwrap(), tcp("fd00::2", 3307));
        assert_eq!(Endpoint::parse("fd00::2").unwrap(), tcp("fd00::2", 3306));
        assert_eq!(
            Endpoint::parse("/run/mysqld/mysqld.sock").unwrap(),
            Endpoint::Socket("/run/mysqld/mysqld.sock".into())
        );
        assert_eq!(Endpoint::parse("[fd00::2]:3307").unwrap().label(), "[fd00::2]:3307");
        for bad in ["", ":3306", "db1:x", "db1:0", "[fd00::2"] {
            assert!(Endpoint::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn only_synced_in_a_primary_component_is_ready() {
        let status = |state: &str, cluster: &str| -> BTreeMap<String, String> {
            [("wsrep_local_state_comment", state), ("wsrep_cluster_status", cluster), ("wsrep_provider_name", "Tandem")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(readiness(&status("Synced", "Primary")), Readiness::Synced);
        assert_eq!(readiness(&status("Joined", "Primary")), Readiness::NotYet("Joined, Primary".into()));
        assert_eq!(readiness(&status("Synced", "non-Primary")), Readiness::NotYet("Synced, non-Primary".into()));
        let mut joining = status("Joining", "Disconnected");
        assert_eq!(readiness(&joining), Readiness::NotYet("Joining, Disconnected".into()));
        joining.insert("wsrep_provider_name".into(), String::new());
        assert_eq!(readiness(&joining), Readiness::NotReplicating, "no provider: a server on its own");
        assert_eq!(readiness(&BTreeMap::new()), Readiness::NotReplicating);
    }
}
