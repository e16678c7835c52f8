//! The `tandem` command line. Each subcommand is a thin layer over the library.

use crate::cluster::{self, Cluster, ClusterSpec, ClusterState, ProviderKind};
use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use node::LoginArgs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(name = "tandem", version, about = "Tandem: a wsrep provider for MariaDB, and tools around it")]
pub struct Cli {
    #[command(flatten)]
    basedir: BasedirArg,
    #[command(subcommand)]
    command: Command,
}

/// `--basedir DIR`, taken by every subcommand, of `tandem` and of `tandem-lab`.
#[derive(Args, Debug)]
pub struct BasedirArg {
    /// Run MariaDB, Galera and sysbench from this relocated tree (unpacked
    /// from ../shared/tools/relocatable-bundle.sh) instead of the installed ones
    #[arg(long, global = true, value_name = "DIR")]
    pub basedir: Option<PathBuf>,
}

impl BasedirArg {
    /// With `--basedir`, starts this program again with the tree's
    /// environment (`crate::basedir::reexec_with`): returns only on failure,
    /// or when it already runs with it.
    pub fn apply(&self) -> Result<()> {
        match &self.basedir {
            Some(dir) => crate::basedir::reexec_with(dir),
            None => Ok(()),
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// MariaDB clusters: local ones on 127.0.0.1 (tandem or Galera provider);
    /// `status --remote` for real ones
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// A voting member without a database (garbd's role): two data nodes
    /// and an arbitrator survive the loss of any one of the three
    Arbitrator(crate::arbitrator::ArbitratorArgs),
    /// The tandem state transfer method, as mariadbd runs it through the
    /// wsrep_sst_tandem script (wsrep_sst_method=tandem)
    Sst(crate::sst::SstCommand),
    /// One node of a real cluster
    #[command(subcommand)]
    Node(node::NodeCommand),
    /// A WAN emulator between sites of a test cluster, and a probe of it
    #[command(subcommand)]
    Wan(tandem_wan::cli::WanCommand),
}

#[derive(Subcommand, Debug)]
enum ClusterCommand {
    /// Create a new cluster and wait until every node is Synced
    Up(UpArgs),
    /// Show each node's process and wsrep status
    Status(StatusArgs),
    /// Stop every node (joiners first) and forget the cluster
    Down(DownArgs),
    /// Start one node of the recorded cluster and wait until it is Synced
    StartNode(StartNodeArgs),
    /// Stop one node of the recorded cluster
    StopNode(StopNodeArgs),
    /// Bring back a cluster that lost its primary component, from its most
    /// advanced node (pc.bootstrap=YES if it runs, else --wsrep-new-cluster);
    /// then start the other nodes, which rejoin it
    Bootstrap(BootstrapArgs),
}

#[derive(Args, Debug)]
struct DirArg {
    /// Directory holding cluster.json and nodeN/
    #[arg(long, default_value = cluster::DEFAULT_DIR)]
    dir: PathBuf,
}

#[derive(Args, Debug)]
struct UpArgs {
    /// Number of nodes
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=64))]
    nodes: u16,
    #[arg(long, value_enum, default_value_t = ProviderKind::Tandem)]
    provider: ProviderKind,
    /// Provider library (default: $TANDEM_PROVIDER or <workspace>/target/release/libtandem.so
    /// for tandem, /usr/lib/galera/libgalera_smm.so for galera)
    #[arg(long)]
    provider_path: Option<PathBuf>,
    #[command(flatten)]
    dir: DirArg,
    /// wsrep_slave_threads
    #[arg(long, default_value_t = cluster::DEFAULT_SLAVE_THREADS)]
    slave_threads: usize,
    /// Extra [mysqld] option KEY=VAL (replaces a generated one); repeatable
    #[arg(long = "extra-option", value_name = "KEY=VAL", value_parser = cluster::config::parse_key_value)]
    extra_options: Vec<(String, String)>,
    /// Extra wsrep_provider_options item KEY=VAL; repeatable
    #[arg(long = "provider-option", value_name = "KEY=VAL", value_parser = cluster::config::parse_key_value)]
    provider_options: Vec<(String, String)>,
    /// Encrypt the group channel: makes a CA and a certificate per node in
    /// <dir>/tls and sets socket.ssl, socket.ssl_ca, socket.ssl_cert, socket.ssl_key
    #[arg(long)]
    tls: bool,
    /// Seconds each node may take to reach Synced
    #[arg(long, default_value_t = cluster::DEFAULT_SYNC_TIMEOUT.as_secs())]
    timeout: u64,
}

#[derive(Args, Debug)]
struct StatusArgs {
    #[command(flatten)]
    dir: DirArg,
    /// Also count the rows of every user table on every node
    #[arg(long)]
    tables: bool,
    /// The nodes of a real cluster instead of a local one: host[:port],
    /// [ipv6]:port or a socket path, comma-separated
    #[arg(long, value_delimiter = ',', value_name = "NODE,...")]
    remote: Vec<String>,
    #[command(flatten)]
    login: LoginArgs,
}

#[derive(Args, Debug)]
struct DownArgs {
    #[command(flatten)]
    dir: DirArg,
    /// Also delete the node directories (data, logs, configs)
    #[arg(long)]
    purge: bool,
}

#[derive(Args, Debug)]
struct StartNodeArgs {
    /// Node number (1-based)
    node: usize,
    #[command(flatten)]
    dir: DirArg,
    /// Start it as a new primary component (when no other node runs)
    #[arg(long)]
    bootstrap: bool,
    /// Seconds the node may take to reach Synced
    #[arg(long, default_value_t = cluster::DEFAULT_SYNC_TIMEOUT.as_secs())]
    timeout: u64,
}

#[derive(Args, Debug)]
struct BootstrapArgs {
    #[command(flatten)]
    dir: DirArg,
    /// Bootstrap the most advanced node (what is done without --node)
    #[arg(long, conflicts_with = "node")]
    safest: bool,
    /// Bootstrap this node (a number; with --remote, a host); refused if
    /// another is more advanced
    #[arg(long)]
    node: Option<String>,
    /// Bootstrap --node even if another node is more advanced (loses what only that one holds)
    #[arg(long, requires = "node")]
    force: bool,
    /// Only bootstrap; leave the other nodes as they are
    #[arg(long)]
    only: bool,
    /// Only show each node's position and which one would be bootstrapped
    #[arg(long)]
    dry_run: bool,
    /// The hosts of a real cluster instead of a local one, comma-separated:
    /// each is asked for its position with `SSH HOST TANDEM node position`
    #[arg(long, value_delimiter = ',', value_name = "HOST,...")]
    remote: Vec<String>,
    /// With --remote: how a command is run on a host (split at spaces; the
    /// host and the command are added)
    #[arg(long, default_value = "ssh -o BatchMode=yes", requires = "remote")]
    ssh: String,
    /// With --remote: how tandem is run on the hosts
    #[arg(long, default_value = "tandem", requires = "remote")]
    remote_tandem: String,
    /// With --remote: arguments for every `tandem node` command on the
    /// hosts (--defaults-file, --user, --password-file), as shell text
    #[arg(long, default_value = "", requires = "remote")]
    node_args: String,
    /// With --remote: starts the chosen host's stopped server as a new cluster
    #[arg(long, default_value = "galera_new_cluster", requires = "remote")]
    new_cluster_command: String,
    /// With --remote: starts the server of every other stopped host
    #[arg(long, default_value = "systemctl start mariadb", requires = "remote")]
    start_command: String,
    /// Seconds each node may take to reach Synced
    #[arg(long, default_value_t = cluster::DEFAULT_SYNC_TIMEOUT.as_secs())]
    timeout: u64,
}

#[derive(Args, Debug)]
struct StopNodeArgs {
    /// Node number (1-based)
    node: usize,
    #[command(flatten)]
    dir: DirArg,
    /// SIGKILL instead of a clean shutdown (simulates a crash)
    #[arg(long)]
    kill: bool,
}

/// Printing that cannot panic: `tandem cluster up | head -1` must not turn a
/// closed pipe into a panic (and, during `up`, into a torn-down cluster).
macro_rules! say {
    ($($arg:tt)*) => { out(&format!($($arg)*)) };
}

macro_rules! esay {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

fn out(text: &str) {
    let _ = writeln!(std::io::stdout(), "{text}");
}

// After the macros: `say!` is used there too.
mod node;

/// Entry point for `main`: errors become one readable message and exit code 1.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = cli.basedir.apply() {
        return exit_code(Err(e));
    }
    // The SST method logs in the server's format and exits with an errno
    // the server passes on: no second error line of ours.
    if let Command::Sst(args) = cli.command {
        return ExitCode::from(crate::sst::run(args));
    }
    // `node check` answers with its exit status (0, 1 or 2), for scripts.
    if let Command::Node(node::NodeCommand::Check(args)) = cli.command {
        return ExitCode::from(node::check(args));
    }
    exit_code(run(cli))
}

/// A command's result for the shell, for `tandem` and `tandem-lab` alike:
/// an error becomes one readable message on stderr and exit code 1.
pub fn exit_code(result: Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            esay!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Cluster(ClusterCommand::Up(args)) => up(args),
        Command::Cluster(ClusterCommand::Status(args)) => status(args),
        Command::Cluster(ClusterCommand::Down(args)) => down(args),
        Command::Cluster(ClusterCommand::StartNode(args)) => start_node(args),
        Command::Cluster(ClusterCommand::StopNode(args)) => stop_node(args),
        Command::Cluster(ClusterCommand::Bootstrap(args)) => bootstrap(args),
        Command::Arbitrator(args) => crate::arbitrator::run(args),
        Command::Node(args) => node::run(args),
        Command::Wan(args) => {
            crate::arbitrator::logger::install(None)?;
            tandem_wan::cli::run(args)
        }
        Command::Sst(args) => match crate::sst::run(args) {
            0 => Ok(()),
            status => anyhow::bail!("the state transfer failed (status {status}; the reason is logged above)"),
        },
    }
}

fn up(args: UpArgs) -> Result<()> {
    let spec = ClusterSpec {
        provider_path: args.provider_path,
        slave_threads: args.slave_threads,
        mysqld_options: args.extra_options,
        provider_options: args.provider_options,
        tls: args.tls,
        sync_timeout: Duration::from_secs(args.timeout),
        verbose: true,
        ..ClusterSpec::new(args.dir.dir, usize::from(args.nodes), args.provider)
    };
    let started = Instant::now();
    let cluster = Cluster::up(spec)?;
    let summary = up_summary(cluster.state(), started.elapsed());
    // Hand the servers over before printing: nothing after this may stop them.
    cluster.keep_running();
    out(&summary);
    Ok(())
}

fn up_summary(state: &ClusterState, took: Duration) -> String {
    let mut out = format!(
        "cluster of {} nodes is up in {:.1} s: provider {} ({})\n",
        state.nodes.len(),
        took.as_secs_f64(),
        state.provider,
        state.provider_path.display()
    );
    for node in &state.nodes {
        out += &format!(
            "  {}: pid {}, sql port {}, group port {}, sst port {}, log {}\n",
            node.name,
            node.pid.unwrap_or(0),
            node.sql_port,
            node.base_port,
            node.sst_port,
            node.error_log.display()
        );
        if let (Some(health), Some(agent)) = (node.health_addr(), node.agent_addr()) {
            out += &format!(
                "    health check http://{health}/health, metrics http://{health}/metrics, agent check {agent}\n"
            );
        }
    }
    out += "connect with:\n";
    for node in &state.nodes {
        out += &format!("  {}\n", node.connect_hint());
    }
    out += &format!("stop with: tandem cluster down --dir {}", state.dir.display());
    out
}

fn status(args: StatusArgs) -> Result<()> {
    if !args.remote.is_empty() {
        anyhow::ensure!(!args.tables, "--tables is for local clusters");
        return remote_status(&args.remote, &args.login.login()?);
    }
    let cluster = Cluster::open(&args.dir.dir)?;
    say!("cluster in {} (provider {})", cluster.dir().display(), cluster.state().provider);
    out(&status_table(&cluster));
    if let Some(rows) = cluster::endpoints::table_rows(cluster.nodes()) {
        out(&format_table(&cluster::endpoints::TABLE_HEADER, &rows));
    }
    if args.tables {
        out(&row_count_table(&cluster)?);
    }
    Ok(())
}

/// The wsrep fields shown per node, with their column titles.
const STATUS_FIELDS: [(&str, &str); 9] = [
    ("wsrep_cluster_size", "SIZE"),
    ("wsrep_cluster_status", "CLUSTER"),
    ("wsrep_local_state_comment", "STATE"),
    ("wsrep_ready", "READY"),
    ("wsrep_last_committed", "LAST_COMMITTED"),
    // How far back this node's gcache reaches, and for how long at the
    // current write rate: how long another node may stay down and still IST.
    ("wsrep_local_cached_downto", "CACHED_DOWNTO"),
    ("wsrep_gcache_reach_seconds", "IST_REACH_S"),
    ("wsrep_provider_name", "PROVIDER"),
    // Tandem's: each link of the group channel, TLS or plaintext.
    ("wsrep_group_links", "LINKS"),
];

/// The same wsrep fields for nodes given by address; the reason a node
/// did not answer goes below the table.
fn remote_status(nodes: &[String], login: &crate::remote::Login) -> Result<()> {
    let client = cluster::prereq::find_program("mariadb")?;
    let endpoints = nodes.iter().map(|n| crate::remote::Endpoint::parse(n)).collect::<Result<Vec<_>>>()?;
    let mut header = vec!["NODE", "ANSWERS"];
    header.extend(STATUS_FIELDS.iter().map(|(_, title)| *title));
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for at in &endpoints {
        let mut row = vec![at.label()];
        match crate::remote::statuses(&client, at, login) {
            Ok(status) => {
                row.push("yes".into());
                row.extend(
                    STATUS_FIELDS.iter().map(|(var, _)| status.get(*var).cloned().unwrap_or_else(|| "?".into())),
                );
            }
            Err(e) => {
                row.push("no".into());
                row.extend(STATUS_FIELDS.iter().map(|_| "-".to_string()));
                errors.push(format!("{e:#}"));
            }
        }
        rows.push(row);
    }
    out(&format_table(&header, &rows));
    for e in &errors {
        esay!("{e}");
    }
    anyhow::ensure!(errors.is_empty(), "{} of {} nodes did not answer", errors.len(), endpoints.len());
    Ok(())
}

fn status_table(cluster: &Cluster) -> String {
    let mut header = vec!["NODE", "PID", "ALIVE", "SQL_PORT"];
    header.extend(STATUS_FIELDS.iter().map(|(_, title)| *title));
    let rows: Vec<Vec<String>> = cluster.nodes().iter().map(status_row).collect();
    format_table(&header, &rows)
}

fn status_row(node: &cluster::Node) -> Vec<String> {
    let alive = node.is_running();
    let pid = node.pid.map_or("-".to_string(), |p| p.to_string());
    let mut row = vec![node.name.clone(), pid, yes_no(alive), node.sql_port.to_string()];
    let status = if alive { node.statuses("wsrep_%").ok() } else { None };
    for (var, _) in STATUS_FIELDS {
        let value = match &status {
            Some(map) => map.get(var).cloned().unwrap_or_else(|| "?".into()),
            None if alive => "(no answer)".into(),
            None => "-".into(),
        };
        row.push(value);
    }
    row
}

/// One row per user table, one column per node: exact `COUNT(*)`.
fn row_count_table(cluster: &Cluster) -> Result<String> {
    let running: Vec<&cluster::Node> = cluster.nodes().iter().filter(|n| n.is_running()).collect();
    let Some(first) = running.first() else {
        return Ok("no node is running".into());
    };
    let tables = first.sql(
        "SELECT table_schema, table_name FROM information_schema.tables \
         WHERE table_type = 'BASE TABLE' AND table_schema NOT IN \
         ('mysql', 'information_schema', 'performance_schema', 'sys') ORDER BY 1, 2",
    )?;
    let mut header = vec!["TABLE".to_string()];
    header.extend(running.iter().map(|n| n.name.clone()));
    let rows = tables.iter().map(|t| count_row(&running, &t[0], &t[1])).collect::<Vec<_>>();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    Ok(format_table(&header, &rows))
}

fn count_row(nodes: &[&cluster::Node], schema: &str, table: &str) -> Vec<String> {
    use cluster::mysql::quote_ident;
    let query = format!("SELECT COUNT(*) FROM {}.{}", quote_ident(schema), quote_ident(table));
    let mut row = vec![format!("{schema}.{table}")];
    for node in nodes {
        let count = node.sql(&query).ok().and_then(|r| r.first()?.first().cloned());
        row.push(count.unwrap_or_else(|| "error".into()));
    }
    row
}

fn down(args: DownArgs) -> Result<()> {
    let dir = &args.dir.dir;
    if ClusterState::load(dir)?.is_none() {
        say!("no cluster recorded in {}: nothing to stop", dir.display());
        return purge_leftovers(dir, args.purge);
    }
    let cluster = Cluster::open(dir)?;
    let names: Vec<String> = cluster.nodes().iter().filter(|n| n.is_running()).map(|n| n.name.clone()).collect();
    cluster.down(args.purge)?;
    let stopped = if names.is_empty() { "none was running".to_string() } else { names.join(", ") };
    say!("stopped: {stopped}{}", if args.purge { "; data removed" } else { "; data kept" });
    Ok(())
}

/// After a `down` without `--purge` the state file is gone but data remains.
fn purge_leftovers(dir: &Path, purge: bool) -> Result<()> {
    if !purge || !dir.exists() {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.join("my.cnf").is_file() && path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("node")) {
            std::fs::remove_dir_all(&path)?;
            say!("removed {}", path.display());
        }
    }
    let _ = std::fs::remove_dir(dir);
    Ok(())
}

fn start_node(args: StartNodeArgs) -> Result<()> {
    let mut cluster = Cluster::open(&args.dir.dir)?;
    let started = Instant::now();
    if args.bootstrap {
        cluster.start_bootstrap(args.node)?;
    } else {
        cluster.start(args.node)?;
    }
    let result = cluster.wait_synced(args.node, Duration::from_secs(args.timeout));
    let node = cluster.node_checked(args.node)?.clone();
    // Even on timeout the server keeps running: the user decides what to do with it.
    cluster.keep_running();
    result?;
    say!("{} is Synced after {:.1} s (pid {})", node.name, started.elapsed().as_secs_f64(), node.pid.unwrap_or(0));
    say!("  {}", node.connect_hint());
    Ok(())
}

fn bootstrap(args: BootstrapArgs) -> Result<()> {
    if !args.remote.is_empty() {
        return remote_bootstrap(args);
    }
    let wanted = match &args.node {
        None => None,
        Some(n) => Some(n.parse::<usize>().map_err(|_| anyhow::anyhow!("--node {n:?}: a node number (1-based)"))?),
    };
    let mut cluster = Cluster::open(&args.dir.dir)?;
    if args.dry_run {
        let candidates = cluster.bootstrap_candidates()?;
        let chosen = cluster::choose_bootstrap(&candidates, wanted, args.force)?;
        say!("{}", candidates_table(&candidates, chosen, "would be bootstrapped"));
        return Ok(());
    }
    let started = Instant::now();
    let result = cluster.bootstrap(wanted, args.force, args.only, Duration::from_secs(args.timeout));
    // Even on failure what runs keeps running: the user decides what to do with it.
    cluster.keep_running();
    let outcome = result?;
    say!("{}", candidates_table(&outcome.candidates, outcome.chosen, "bootstrapped"));
    let how = if outcome.in_place { "pc.bootstrap=YES" } else { "--wsrep-new-cluster" };
    let name = &outcome.candidates[outcome.chosen - 1].name;
    say!("{name} bootstrapped ({how}); {} other node(s) started and rejoined", outcome.started.len());
    say!("Synced after {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

fn remote_bootstrap(args: BootstrapArgs) -> Result<()> {
    let plan = crate::remote::bootstrap::Plan {
        hosts: args.remote,
        ssh: args.ssh.split_whitespace().map(String::from).collect(),
        tandem: args.remote_tandem,
        node_args: args.node_args,
        new_cluster: args.new_cluster_command,
        start: args.start_command,
        wanted: args.node,
        force: args.force,
        only: args.only,
        dry_run: args.dry_run,
        timeout: Duration::from_secs(args.timeout),
    };
    let started = Instant::now();
    let outcome = crate::remote::bootstrap::run(&plan, &|line| esay!("{line}"))?;
    let verdict = if plan.dry_run { "would be bootstrapped" } else { "bootstrapped" };
    say!("{}", candidates_table(&outcome.candidates, outcome.chosen, verdict));
    if !plan.dry_run {
        let name = &outcome.candidates[outcome.chosen - 1].name;
        say!("{name} bootstrapped; {} other host(s) started and rejoined", outcome.started.len());
        say!("Synced after {:.1} s", started.elapsed().as_secs_f64());
    }
    Ok(())
}

/// Each node's position, the chosen one marked.
fn candidates_table(candidates: &[cluster::Candidate], chosen: usize, verdict: &str) -> String {
    let header = ["node", "was", "group log (term/index)", "database seqno"];
    let rows: Vec<Vec<String>> = candidates
        .iter()
        .map(|c| {
            let log = match (c.log_last, &c.log_note) {
                (Some((term, index)), _) => format!("{term}/{index}"),
                (None, Some(note)) => format!("not usable: {note}"),
                (None, None) => "-".into(),
            };
            let mark = if c.index == chosen { format!(" <- {verdict}") } else { String::new() };
            vec![
                format!("{}{mark}", c.name),
                if c.running { "running".into() } else { "stopped".into() },
                log,
                c.seqno.map_or("unknown".into(), |s| s.to_string()),
            ]
        })
        .collect();
    format_table(&header, &rows)
}

fn stop_node(args: StopNodeArgs) -> Result<()> {
    let mut cluster = Cluster::open(&args.dir.dir)?;
    let node = cluster.node_checked(args.node)?.clone();
    if !node.is_running() {
        say!("{} is not running", node.name);
        return Ok(());
    }
    if args.kill {
        cluster.kill(args.node)?;
    } else {
        cluster.stop(args.node)?;
    }
    let how = if args.kill { "killed (SIGKILL)" } else { "stopped" };
    say!("{} (pid {}) {how}", node.name, node.pid.unwrap_or(0));
    Ok(())
}

fn yes_no(b: bool) -> String {
    (if b { "yes" } else { "no" }).to_string()
}

/// Left-aligned columns separated by two spaces.
pub fn format_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        padded.join("  ").trim_end().to_string()
    };
    let mut out = vec![line(header.to_vec())];
    out.extend(rows.iter().map(|r| line(r.iter().map(String::as_str).collect())));
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn up_arguments_parse() {
        let cli = Cli::try_parse_from([
            "tandem",
            "cluster",
            "up",
            "--nodes",
            "2",
            "--provider",
            "galera",
            "--dir",
            "/tmp/x",
            "--extra-option",
            "wsrep_debug=1",
            "--extra-option",
            "a=b",
            "--provider-option",
            "gcache.size=32M",
        ])
        .unwrap();
        let Command::Cluster(ClusterCommand::Up(args)) = cli.command else { panic!("not up") };
        assert_eq!(args.nodes, 2);
        assert_eq!(args.provider, ProviderKind::Galera);
        assert_eq!(args.extra_options.len(), 2);
        assert_eq!(args.provider_options[0], ("gcache.size".into(), "32M".into()));
        assert_eq!(args.dir.dir, PathBuf::from("/tmp/x"));
    }

    #[test]
    fn bad_extra_option_is_rejected() {
        let parsed = Cli::try_parse_from(["tandem", "cluster", "up", "--extra-option", "nokey"]);
        assert!(parsed.is_err());
    }

    #[test]
    fn table_is_aligned() {
        let rows = vec![vec!["node1".into(), "12345".into()], vec!["n2".into(), "1".into()]];
        let table = format_table(&["NODE", "PID"], &rows);
        assert_eq!(table, "NODE   PID\nnode1  12345\nn2     1");
    }

    #[test]
    fn status_on_missing_cluster_is_an_error_not_a_panic() {
        let tmp = tempfile::tempdir().unwrap();
        let cli = Cli::try_parse_from(["tandem", "cluster", "status", "--dir", tmp.path().to_str().unwrap()]).unwrap();
        let err = run(cli).unwrap_err();
        assert!(err.to_string().contains("no cluster recorded"), "{err}");
    }
}
