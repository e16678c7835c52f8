//! The command line mariadbd gives an SST method (10.11; see
//! `shared/reference/sst-contract.md` §1.2-1.4). Everything after
//! `--mysqld-args` is the server's own argv, kept apart: `--user=root` there
//! is mariadbd's user, not ours.

use anyhow::{anyhow, bail, Result};
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Joiner,
    Donor,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SstArgs {
    pub role: Role,
    pub address: String,
    pub datadir: PathBuf,
    /// `--defaults-file` and friends, to be handed to `my_print_defaults`.
    pub defaults: Vec<String>,
    pub parent: Option<u32>,
    pub progress: bool,
    pub binlog: Option<String>,
    pub binlog_index: Option<String>,
    /// Donor: the server's SQL port and socket (unused by this method).
    pub local_port: Option<u16>,
    pub socket: Option<String>,
    /// Donor: the position being donated (`uuid:seqno`).
    pub gtid: Option<String>,
    pub gtid_domain_id: u32,
    pub bypass: bool,
    pub mysqld_args: Vec<String>,
}

impl SstArgs {
    pub fn parse(argv: &[String]) -> Result<SstArgs> {
        let mut role = None;
        let (mut address, mut datadir) = (None, None);
        let mut out = SstArgs {
            role: Role::Donor,
            address: String::new(),
            datadir: PathBuf::new(),
            defaults: Vec::new(),
            parent: None,
            progress: false,
            binlog: None,
            binlog_index: None,
            local_port: None,
            socket: None,
            gtid: None,
            gtid_domain_id: 0,
            bypass: false,
            mysqld_args: Vec::new(),
        };
        let mut i = 0;
        while i < argv.len() {
            let arg = &argv[i];
            i += 1;
            if arg == "--mysqld-args" {
                out.mysqld_args = argv[i..].to_vec();
                break;
            }
            if arg == "--bypass" {
                out.bypass = true;
                continue;
            }
            let (name, inline) = match arg.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
                _ => (arg.as_str(), None),
            };
            let mut value = || -> Result<String> {
                if let Some(v) = inline.clone() {
                    return Ok(v);
                }
                let v = argv.get(i).cloned().ok_or_else(|| anyhow!("{name} needs a value"))?;
                i += 1;
                Ok(v)
            };
            match name {
                "--role" => {
                    role = Some(match value()?.as_str() {
                        "joiner" => Role::Joiner,
                        "donor" => Role::Donor,
                        other => bail!("--role '{other}': expected joiner or donor"),
                    })
                }
                "--address" => address = Some(value()?),
                "--datadir" => datadir = Some(PathBuf::from(value()?.trim_end_matches('/'))),
                "--defaults-file" | "--defaults-extra-file" | "--defaults-group-suffix" => {
                    let v = value()?;
                    out.defaults.push(format!("{name}={v}"));
                }
                "--parent" => out.parent = Some(number(name, &value()?)?),
                "--progress" => out.progress = value()? == "1",
                "--binlog" => out.binlog = Some(value()?),
                "--binlog-index" => out.binlog_index = Some(value()?),
                "--local-port" => out.local_port = Some(number(name, &value()?)?),
                "--socket" => out.socket = Some(value()?),
                "--gtid" => out.gtid = Some(value()?),
                "--gtid-domain-id" => out.gtid_domain_id = number(name, &value()?)?,
                other => {
                    bail!("unknown option '{other}' (this is the tandem SST method's command line, given by mariadbd)")
                }
            }
        }
        out.role = role.ok_or_else(|| anyhow!("--role is missing"))?;
        out.address = address.ok_or_else(|| anyhow!("--address is missing"))?;
        out.datadir = datadir.ok_or_else(|| anyhow!("--datadir is missing"))?;
        if out.role == Role::Donor && out.gtid.is_none() {
            bail!("--gtid is missing (the donor's position)");
        }
        Ok(out)
    }

    /// The value of a server option given on mariadbd's own command line
    /// (`--name=value`, either spelling of dashes), the last one winning.
    pub fn server_option(&self, name: &str) -> Option<String> {
        let want = name.replace('_', "-");
        self.mysqld_args.iter().rev().find_map(|a| {
            let (k, v) = a.strip_prefix("--")?.split_once('=')?;
            let k = k.replace('_', "-");
            let k = k.strip_prefix("loose-").unwrap_or(&k);
            (k == want).then(|| v.to_string())
        })
    }
}

fn number<T: std::str::FromStr>(name: &str, v: &str) -> Result<T> {
    v.parse().map_err(|_| anyhow!("{name} '{v}': not a number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    /// The joiner's argv as MariaDB 10.11.19 gives it (contract §1.2).
    #[test]
    fn joiner_command_line_of_the_server() {
        let a = SstArgs::parse(&argv(&[
            "--role",
            "joiner",
            "--address",
            "127.0.0.1:24454",
            "--datadir",
            "/d/n2/data/",
            "--defaults-file",
            "/d/n2/my.cnf",
            "--parent",
            "19494",
            "--progress",
            "0",
            "--binlog",
            "mysql-bin",
            "--mysqld-args",
            "--defaults-file=/d/n2/my.cnf",
            "--user=root",
            "--wsrep_sst_method=tandem",
        ]))
        .unwrap();
        assert_eq!(a.role, Role::Joiner);
        assert_eq!(a.address, "127.0.0.1:24454");
        assert_eq!(a.datadir, PathBuf::from("/d/n2/data"));
        assert_eq!(a.defaults, ["--defaults-file=/d/n2/my.cnf"]);
        assert_eq!((a.parent, a.progress, a.binlog.as_deref()), (Some(19494), false, Some("mysql-bin")));
        assert_eq!(a.mysqld_args.len(), 3);
        assert_eq!(a.server_option("wsrep-sst-method").as_deref(), Some("tandem"));
        assert_eq!(a.server_option("user").as_deref(), Some("root"));
    }

    /// The donor's, with --bypass for an IST (contract §1.3).
    #[test]
    fn donor_command_line_of_the_server() {
        let a = SstArgs::parse(&argv(&[
            "--role",
            "donor",
            "--address",
            "127.0.0.1:24454/tandem/ab12",
            "--local-port",
            "23306",
            "--socket",
            "/d/n1/mysql.sock",
            "--progress",
            "1",
            "--datadir",
            "/d/n1/data/",
            "--defaults-file",
            "/d/n1/my.cnf",
            "--gtid",
            "f149d744-e5fa-11f1-a3c6-2acd1d88e0b9:2431",
            "--gtid-domain-id",
            "0",
            "--bypass",
            "--mysqld-args",
            "--user=root",
            "--wsrep-new-cluster",
        ]))
        .unwrap();
        assert_eq!(a.role, Role::Donor);
        assert!(a.bypass && a.progress);
        assert_eq!(a.local_port, Some(23306));
        assert_eq!(a.gtid.as_deref(), Some("f149d744-e5fa-11f1-a3c6-2acd1d88e0b9:2431"));
        assert_eq!(a.mysqld_args, ["--user=root", "--wsrep-new-cluster"]);
    }

    #[test]
    fn mistakes_are_named() {
        let err = |s: &[&str]| SstArgs::parse(&argv(s)).unwrap_err().to_string();
        assert!(err(&["--role", "both", "--address", "a", "--datadir", "d"]).contains("'both'"));
        assert!(err(&["--address", "a", "--datadir", "d"]).contains("--role is missing"));
        assert!(err(&["--role", "joiner", "--datadir", "d"]).contains("--address is missing"));
        assert!(err(&["--role", "donor", "--address", "a", "--datadir", "d"]).contains("--gtid"));
        assert!(err(&["--role", "joiner", "--frobnicate", "1"]).contains("unknown option '--frobnicate'"));
        assert!(err(&["--role", "joiner", "--parent", "x"]).contains("not a number"));
        assert!(err(&["--role"]).contains("needs a value"));
        let a = SstArgs::parse(&argv(&["--role=joiner", "--address=h:1", "--datadir=/x"])).unwrap();
        assert_eq!((a.role, a.address.as_str()), (Role::Joiner, "h:1"));
    }
}
