//! Where one node of a real cluster stands, read on its own host: `tandem
//! node position`. `tandem cluster bootstrap --remote` runs it on every
//! host (over ssh) and compares the answers, because the facts that decide
//! whom to bootstrap live in files only that host can read: the group log
//! (Tandem's durable state), grastate.dat, and InnoDB's own position, which
//! only `mariadbd --wsrep-recover` reads.
//!
//! The server's settings come from its option files as the server reads
//! them (`my_print_defaults --mysqld`, which honours `MYSQL_HOME`), or from
//! one file given with `--defaults-file`, so that the answer is about the
//! server `systemctl start mariadb` would start, not a guess.

use super::{statuses, Endpoint, Login};
use crate::cluster::bootstrap::{group_log_standing, parse_recovered_position, saved_seqno, seqno_of, Candidate};
use crate::option_files;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// mariadbd's built-in defaults, used when no option file names them.
const DEFAULT_DATADIR: &str = "/var/lib/mysql";
const DEFAULT_SOCKET: &str = "/run/mysqld/mysqld.sock";
/// The first line of `tandem node position`'s answer: a reader that meets
/// another version refuses it rather than misreading it.
pub const HEADER: &str = "# tandem node position v1";

/// What the server's option files say, as far as its position goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// The one option file given with `--defaults-file`, passed on to
    /// `mariadbd --wsrep-recover`.
    pub defaults_file: Option<PathBuf>,
    pub datadir: PathBuf,
    pub socket: PathBuf,
    /// `user=`: whom mariadbd runs as.
    pub user: Option<String>,
    /// `wsrep_provider_options`, item by item.
    pub provider_options: BTreeMap<String, String>,
}

impl ServerConfig {
    /// Reads the `[mysqld]` settings the way the server will.
    pub fn read(defaults_file: Option<&Path>) -> Result<ServerConfig> {
        let files: Vec<String> = defaults_file.iter().map(|f| format!("--defaults-file={}", f.display())).collect();
        let options = option_files::print_defaults(&files, &["--mysqld"])?;
        Ok(ServerConfig::from_options(&options, defaults_file))
    }

    /// From [`option_files::print_defaults`]' map (keys with dashes).
    pub fn from_options(options: &BTreeMap<String, String>, defaults_file: Option<&Path>) -> ServerConfig {
        let get = |key: &str| options.get(key).cloned();
        ServerConfig {
            defaults_file: defaults_file.map(Path::to_path_buf),
            datadir: PathBuf::from(get("datadir").unwrap_or_else(|| DEFAULT_DATADIR.into())),
            socket: PathBuf::from(get("socket").unwrap_or_else(|| DEFAULT_SOCKET.into())),
            user: get("user"),
            provider_options: option_files::parse_provider_options(&get("wsrep-provider-options").unwrap_or_default()),
        }
    }
}

/// One node's position, as `tandem node position` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Position {
    pub datadir: PathBuf,
    pub running: bool,
    /// In a primary component now: then there is nothing to bootstrap.
    pub primary: bool,
    /// (term, index) of the last entry of its group log, if it has a
    /// trusted one.
    pub log_last: Option<(u64, u64)>,
    /// Why its group log does not count, if it has one that does not.
    pub log_note: Option<String>,
    /// The seqno its database is at, when known.
    pub seqno: Option<i64>,
}

impl Position {
    /// Lines of `key: value`, as grastate.dat is written: readable by a
    /// person and by [`Position::parse`].
    pub fn render(&self) -> String {
        let log = match (self.log_last, &self.log_note) {
            (Some((term, index)), _) => format!("{term}/{index}"),
            (None, Some(note)) => format!("unusable {}", note.replace('\n', " ")),
            (None, None) => "none".into(),
        };
        let seqno = self.seqno.map_or("unknown".into(), |s| s.to_string());
        format!(
            "{HEADER}\ndatadir: {}\nrunning: {}\nprimary: {}\nlog: {log}\nseqno: {seqno}\n",
            self.datadir.display(),
            yes_no(self.running),
            yes_no(self.primary)
        )
    }

    /// Reads [`Position::render`]'s text (from another host: anything
    /// else is refused, naming what was wrong).
    pub fn parse(text: &str) -> Result<Position> {
        let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        match lines.next() {
            Some(HEADER) => {}
            Some(other) => bail!("not a tandem node position (first line {other:?}, expected {HEADER:?})"),
            None => bail!("no answer"),
        }
        let fields: Vec<(&str, &str)> = lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k, v.trim())).collect();
        let field = |key: &str| {
            fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v).with_context(|| format!("no {key:?} line"))
        };
        let flag = |key: &str| match field(key)? {
            "yes" => Ok(true),
            "no" => Ok(false),
            other => bail!("{key}: {other:?} is neither yes nor no"),
        };
        let (log_last, log_note) = match field("log")? {
            "none" => (None, None),
            text if text.starts_with("unusable") => (None, Some(text["unusable".len()..].trim().to_string())),
            text => {
                let parsed = text.split_once('/').and_then(|(t, i)| Some((t.parse().ok()?, i.parse().ok()?)));
                (Some(parsed.with_context(|| format!("log: {text:?} is not term/index"))?), None)
            }
        };
        let seqno = match field("seqno")? {
            "unknown" => None,
            text => Some(text.parse().with_context(|| format!("seqno: {text:?}"))?),
        };
        Ok(Position {
            datadir: PathBuf::from(field("datadir")?),
            running: flag("running")?,
            primary: flag("primary")?,
            log_last,
            log_note,
            seqno,
        })
    }

    /// The same facts, as the choice of whom to bootstrap weighs them.
    pub fn candidate(&self, index: usize, name: &str) -> Candidate {
        Candidate {
            index,
            name: name.to_string(),
            running: self.running,
            log_last: self.log_last,
            log_note: self.log_note.clone(),
            seqno: self.seqno,
        }
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// Reads this host's node: from the running server if it runs, else from
/// its files (grastate.dat, then `mariadbd --wsrep-recover` when that has
/// no seqno). The group log is read either way.
pub fn read(config: &ServerConfig, login: &Login) -> Result<Position> {
    let client = crate::cluster::find_program("mariadb")?;
    let (running, primary, seqno) = match server_status(&client, config, login)? {
        Some(status) => {
            let get = |k: &str| status.get(k).map(String::as_str).unwrap_or("");
            (true, get("wsrep_cluster_status") == "Primary", get("wsrep_last_committed").parse().ok())
        }
        None => {
            let seqno = match saved_seqno(&config.datadir) {
                Some(seqno) => Some(seqno),
                // Only when grastate.dat has none (a crash): recovery starts InnoDB.
                None => recover_seqno(config)?,
            };
            (false, false, seqno)
        }
    };
    let (log_last, log_note) = group_log_standing(&config.datadir, |key| config.provider_options.get(key).cloned());
    Ok(Position { datadir: config.datadir.clone(), running, primary, log_last, log_note, seqno })
}

/// The server's wsrep status, or None when no server listens on its
/// socket. A server that listens but does not answer is an error: its
/// position cannot be known, and guessing "stopped" would run a recovery
/// beside it.
pub(crate) fn server_status(
    client: &Path,
    config: &ServerConfig,
    login: &Login,
) -> Result<Option<BTreeMap<String, String>>> {
    let at = Endpoint::Socket(config.socket.clone());
    match statuses(client, &at, login) {
        Ok(status) => Ok(Some(status)),
        Err(e) => {
            if std::os::unix::net::UnixStream::connect(&config.socket).is_ok() {
                return Err(e.context("the server listens but did not answer"));
            }
            Ok(None)
        }
    }
}

/// InnoDB's position, as `mariadbd --wsrep-recover` prints it (the
/// server's log goes to stderr here, as MariaDB's own galera_recovery
/// reads it). None for a data directory without a database.
fn recover_seqno(config: &ServerConfig) -> Result<Option<i64>> {
    if !config.datadir.join("ibdata1").exists() {
        return Ok(None);
    }
    let mariadbd = crate::cluster::find_program("mariadbd")?;
    let mut cmd = Command::new(mariadbd);
    if let Some(file) = &config.defaults_file {
        cmd.arg(format!("--defaults-file={}", file.display()));
    }
    cmd.args(["--wsrep-recover", "--disable-log-error"]);
    // mariadbd refuses root unless told whom to run as: the owner of the
    // data directory is whom the server runs as.
    if config.user.is_none() && rustix::process::geteuid().is_root() {
        use std::os::unix::fs::MetadataExt;
        let owner = std::fs::metadata(&config.datadir)?.uid();
        cmd.arg(format!("--user={owner}"));
    }
    let output = cmd.stdin(Stdio::null()).stdout(Stdio::null()).output().context("running mariadbd --wsrep-recover")?;
    let log = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!("mariadbd --wsrep-recover failed ({}):\n{}", output.status, tail.join("\n"));
    }
    Ok(parse_recovered_position(&log).and_then(|p| seqno_of(&p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_settings_come_from_its_option_files_or_its_defaults() {
        let text = "--socket=/run/mysqld/mysqld.sock\n--datadir=/var/lib/mysql\n--datadir=/srv/db\n\
                    --wsrep_provider_options=gcache.size=2G; gcache.dir = cache\n--user=mysql\n--skip-name-resolve\n";
        let config = ServerConfig::from_options(&option_files::parse_print_defaults(text), None);
        assert_eq!(config.datadir, Path::new("/srv/db"));
        assert_eq!(config.socket, Path::new("/run/mysqld/mysqld.sock"));
        assert_eq!(config.user.as_deref(), Some("mysql"));
        assert_eq!(config.provider_options.get("gcache.dir").map(String::as_str), Some("cache"));

        let bare = ServerConfig::from_options(&BTreeMap::new(), Some(Path::new("/etc/x.cnf")));
        assert_eq!(bare.datadir, Path::new(DEFAULT_DATADIR), "mariadbd's own default");
        assert_eq!(bare.socket, Path::new(DEFAULT_SOCKET));
        assert!(bare.provider_options.is_empty() && bare.user.is_none());
        assert_eq!(bare.defaults_file.as_deref(), Some(Path::new("/etc/x.cnf")));
    }

    #[test]
    fn a_position_reads_back_as_it_was_written() {
        let cases = [
            Position {
                datadir: "/var/lib/mysql".into(),
                running: false,
                primary: false,
                log_last: Some((3, 1042)),
                log_note: None,
                seqno: Some(1005),
            },
            Position {
                datadir: "/srv/db".into(),
                running: true,
                primary: false,
                log_last: None,
                log_note: Some("written by another machine boot: not\nfsynced".into()),
                seqno: None,
            },
            Position {
                datadir: "/d".into(),
                running: true,
                primary: true,
                log_last: None,
                log_note: None,
                seqno: Some(0),
            },
        ];
        for position in cases {
            let text = position.render();
            assert!(text.starts_with(HEADER), "{text}");
            let back = Position::parse(&text).unwrap();
            let want = Position { log_note: position.log_note.as_ref().map(|n| n.replace('\n', " ")), ..position };
            assert_eq!(back, want, "{text}");
        }
    }

    #[test]
    fn another_answer_is_refused_not_misread() {
        let good = Position {
            datadir: "/d".into(),
            running: false,
            primary: false,
            log_last: Some((1, 2)),
            log_note: None,
            seqno: Some(2),
        }
        .render();
        let bad = [
            ("", "no answer"),
            ("bash: tandem: command not found\n", "not a tandem node position"),
            ("# tandem node position v2\nseqno: 1\n", "not a tandem node position"),
        ];
        for (text, want) in bad {
            let err = format!("{:#}", Position::parse(text).unwrap_err());
            assert!(err.contains(want), "{text:?}: {err}");
        }
        for (from, to, want) in [
            ("log: 1/2", "log: 1-2", "not term/index"),
            ("seqno: 2", "seqno: two", "seqno"),
            ("running: no", "running: maybe", "neither yes nor no"),
            ("primary: no\n", "", "no \"primary\" line"),
        ] {
            let text = good.replace(from, to);
            let err = format!("{:#}", Position::parse(&text).unwrap_err());
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }
}
