//! `tandem node`: commands run on one host of a real cluster, about the
//! node there (also what `cluster bootstrap --remote` runs over ssh).

use super::out;
use crate::cluster;
use anyhow::Result;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub(super) enum NodeCommand {
    /// Wait until the node is Synced in a primary component (for systemd's
    /// ExecStartPost: a rolling restart then waits for each node in turn)
    WaitSynced(WaitSyncedArgs),
    /// Where this host's node stands: its group log, its database seqno
    /// (grastate.dat, or mariadbd --wsrep-recover), running or not; what
    /// `cluster bootstrap --remote` compares across hosts
    Position(NodeArgs),
    /// Make this host's node a new primary component (pc.bootstrap=YES if
    /// it runs, else grastate.dat marked safe and --new-cluster-command),
    /// then wait until it is Synced. Compares nothing: `cluster bootstrap
    /// --remote` runs it on the host it chose
    Bootstrap(NodeBootstrapArgs),
    /// Whether the node should take client traffic, as an exit status (for
    /// keepalived's vrrp_script and other scripts)
    ///
    /// The rule is the provider's /health rule (clustercheck's): available
    /// when Synced in the primary component, or a donor/desynced node when
    /// donors count (--available-when-donor, or the node's own
    /// health.donor_available=YES). read_only does not count unless
    /// --unavailable-when-readonly is given. One line says why.
    ///
    /// Exit status: 0 the node should take traffic; 1 it should not; 2 cannot
    /// tell (no connection, no answer in time, a status missing, bad options).
    Check(CheckArgs),
}

/// Which server on this host: the one its option files describe.
#[derive(Args, Debug)]
pub(super) struct NodeArgs {
    /// Read the server's settings from this file only (default: the
    /// server's own option files, as `my_print_defaults --mysqld` reads them)
    #[arg(long, value_name = "FILE")]
    defaults_file: Option<PathBuf>,
    #[command(flatten)]
    login: LoginArgs,
}

impl NodeArgs {
    fn config(&self) -> Result<crate::remote::position::ServerConfig> {
        crate::remote::position::ServerConfig::read(self.defaults_file.as_deref())
    }
}

#[derive(Args, Debug)]
pub(super) struct NodeBootstrapArgs {
    #[command(flatten)]
    node: NodeArgs,
    /// Starts the stopped server as a new cluster (run by sh)
    #[arg(long, default_value = "galera_new_cluster")]
    new_cluster_command: String,
    /// Seconds the node may take to reach Synced
    #[arg(long, default_value_t = cluster::DEFAULT_SYNC_TIMEOUT.as_secs())]
    timeout: u64,
}

/// How to log in to a real node's SQL. The password comes from
/// --password-file, $TANDEM_PASSWORD or the file $TANDEM_PASSWORD_FILE
/// names; never from the command line.
#[derive(Args, Debug)]
pub(super) struct LoginArgs {
    /// SQL user (default: the client's, i.e. the login name)
    #[arg(long)]
    user: Option<String>,
    /// File holding the SQL password (one trailing newline is ignored)
    #[arg(long, value_name = "FILE")]
    password_file: Option<PathBuf>,
}

impl LoginArgs {
    pub(super) fn login(&self) -> Result<crate::remote::Login> {
        crate::remote::Login::from_cli(self.user.clone(), self.password_file.as_deref())
    }
}

#[derive(Args, Debug)]
pub(super) struct WaitSyncedArgs {
    /// The node: a socket path, host, host:port or [ipv6]:port (default:
    /// the socket of this host's server, from its option files)
    #[arg(long)]
    node: Option<String>,
    /// Where the default socket is read from (default: the server's own option files)
    #[arg(long, value_name = "FILE", conflicts_with = "node")]
    defaults_file: Option<PathBuf>,
    #[command(flatten)]
    login: LoginArgs,
    /// Give up after this many seconds (default: never; under systemd its
    /// start timeout decides)
    #[arg(long)]
    timeout: Option<u64>,
}

// The node is found as `wait-synced` finds it.
#[derive(Args, Debug)]
pub(super) struct CheckArgs {
    /// The node: a socket path, host, host:port or [ipv6]:port (default:
    /// the socket of this host's server, from its option files)
    #[arg(long)]
    node: Option<String>,
    /// Where the default socket is read from (default: the server's own option files)
    #[arg(long, value_name = "FILE", conflicts_with = "node")]
    defaults_file: Option<PathBuf>,
    #[command(flatten)]
    login: LoginArgs,
    /// A donor or desynced node counts as available (clustercheck's AVAILABLE_WHEN_DONOR)
    #[arg(long)]
    available_when_donor: bool,
    /// A node with read_only=ON counts as unavailable, for a script that
    /// decides where writes go (clustercheck's AVAILABLE_WHEN_READONLY=0)
    #[arg(long)]
    unavailable_when_readonly: bool,
    /// Seconds to wait for the node's answer before exiting 2
    #[arg(long, default_value_t = 5)]
    timeout: u64,
}

pub(super) fn run(command: NodeCommand) -> Result<()> {
    match command {
        // `tandem`'s main answers it with 0, 1 or 2 before this; from
        // another front end it is a plain success or failure.
        NodeCommand::Check(args) => match check(args) {
            0 => Ok(()),
            status => anyhow::bail!("exit status {status}"),
        },
        NodeCommand::WaitSynced(args) => wait_synced(args),
        NodeCommand::Position(args) => {
            let position = crate::remote::position::read(&args.config()?, &args.login.login()?)?;
            print!("{}", position.render());
            Ok(())
        }
        NodeCommand::Bootstrap(args) => {
            let config = args.node.config()?;
            let timeout = Duration::from_secs(args.timeout);
            let login = args.node.login.login()?;
            let how = crate::remote::bootstrap::bootstrap_here(&config, &login, &args.new_cluster_command, timeout)?;
            say!("bootstrapped ({how}); Synced");
            Ok(())
        }
    }
}

/// The node `--node` names, else this host's server's socket.
fn endpoint(node: Option<&str>, defaults_file: Option<&std::path::Path>) -> Result<crate::remote::Endpoint> {
    match node {
        Some(node) => crate::remote::Endpoint::parse(node),
        None => {
            let config = crate::remote::position::ServerConfig::read(defaults_file)?;
            Ok(crate::remote::Endpoint::Socket(config.socket))
        }
    }
}

/// `tandem node check`: prints one line and returns the exit status.
pub(super) fn check(args: CheckArgs) -> u8 {
    use crate::remote::check;
    let options = check::CheckOptions {
        available_when_donor: args.available_when_donor,
        unavailable_when_readonly: args.unavailable_when_readonly,
    };
    let label = args.node.clone().unwrap_or_else(|| "this host's node".into());
    let read = || -> Result<_> {
        let at = endpoint(args.node.as_deref(), args.defaults_file.as_deref())?;
        let client = cluster::prereq::find_program("mariadb")?;
        check::read(&client, &at, &args.login.login()?, Duration::from_secs(args.timeout.max(1)))
    };
    match read().map_err(|e| format!("{e:#}")).and_then(|shown| check::decide(&shown, &options)) {
        Ok(check::Verdict::Available(why)) => {
            out(&format!("{label}: available: {why}"));
            check::AVAILABLE
        }
        Ok(check::Verdict::NotAvailable(why)) => {
            out(&format!("{label}: not available: {why}"));
            check::NOT_AVAILABLE
        }
        Err(why) => {
            eprintln!("{label}: cannot tell: {}", why.replace('\n', " "));
            check::CANNOT_TELL
        }
    }
}

fn wait_synced(args: WaitSyncedArgs) -> Result<()> {
    let client = cluster::prereq::find_program("mariadb")?;
    let at = endpoint(args.node.as_deref(), args.defaults_file.as_deref())?;
    let took = crate::remote::wait_synced(&client, &at, &args.login.login()?, args.timeout.map(Duration::from_secs))?;
    say!("{} is Synced (waited {:.1} s)", at.label(), took.as_secs_f64());
    Ok(())
}
