//! Local MariaDB clusters (tandem or Galera provider) for humans and tests.
//!
//! `Cluster::up` writes one `my.cnf` per node under `dir/nodeN/`, bootstraps
//! node 1 and joins the others one at a time (2-core boxes cannot afford
//! parallel SSTs), recording PIDs and ports in `dir/cluster.json`. Nodes are
//! numbered from 1 everywhere, as in their directory names.

pub(crate) mod bootstrap;
pub mod certs;
pub mod config;
pub mod endpoints;
pub mod mysql;
mod node;
pub mod ports;
pub mod prereq;
pub mod process;
pub mod sst_script;
pub mod state;

pub use bootstrap::{choose as choose_bootstrap, Candidate, Outcome as BootstrapOutcome};
pub use node::SQL_TIMEOUT;
pub use state::{ClusterState, Node, ProviderKind};

use anyhow::{anyhow, bail, Context, Result};
pub(crate) use prereq::find_program;
use prereq::{resolve_provider, Tools};
use process::Signal;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const DEFAULT_DIR: &str = ".tandem/cluster";
pub const DEFAULT_SYNC_TIMEOUT: Duration = Duration::from_secs(300);
pub const DEFAULT_SLAVE_THREADS: usize = 4;
/// SIGTERM grace period before SIGKILL.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(60);
const LOG_TAIL_LINES: usize = 30;
/// Lines of each other node's SST and error messages added to a failure.
const PEER_LOG_LINES: usize = 15;
/// `sun_path` holds 108 bytes including the NUL; longer socket paths fail late and obscurely.
const MAX_SOCKET_PATH: usize = 107;

/// What to bring up.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    /// Everything lives here: `cluster.json` and `nodeN/{my.cnf,data,error.log}`.
    pub dir: PathBuf,
    pub nodes: usize,
    pub provider: ProviderKind,
    /// Overrides the provider library (see `prereq::resolve_provider`).
    pub provider_path: Option<PathBuf>,
    pub slave_threads: usize,
    /// Extra `[mysqld]` options; a key we generate is replaced, others appended.
    pub mysqld_options: Vec<(String, String)>,
    /// Extra `wsrep_provider_options` items after `base_port`.
    pub provider_options: Vec<(String, String)>,
    /// Encrypt the group channel with certificates made for the cluster.
    pub tls: bool,
    /// Per node: how long one node may take to reach Synced.
    pub sync_timeout: Duration,
    /// Report each node's progress on stderr (the CLI; tests keep quiet).
    pub verbose: bool,
    /// Where each node lives, in node order; empty: all on loopback.
    pub hosts: Vec<Host>,
}

/// A node's address, and the network namespace it runs in (tests that cut
/// links between nodes put each in its own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    pub address: String,
    pub netns: Option<String>,
    /// Its site (`gmcast.segment`), for clusters whose hosts are in sites.
    pub segment: Option<u8>,
}

impl ClusterSpec {
    pub fn new(dir: impl Into<PathBuf>, nodes: usize, provider: ProviderKind) -> ClusterSpec {
        ClusterSpec {
            dir: dir.into(),
            nodes,
            provider,
            provider_path: None,
            slave_threads: DEFAULT_SLAVE_THREADS,
            mysqld_options: Vec::new(),
            provider_options: Vec::new(),
            tls: false,
            sync_timeout: DEFAULT_SYNC_TIMEOUT,
            verbose: false,
            hosts: Vec::new(),
        }
    }
}

/// How to start a node's mariadbd.
#[derive(Clone, Debug, Default)]
pub struct Start {
    /// `--wsrep-new-cluster`.
    pub bootstrap: bool,
    /// Do not pass the position `mariadbd --wsrep-recover` reads as
    /// `--wsrep_start_position` (what the distribution's `galera_recovery`
    /// does): the server starts as a bare `mariadbd` would.
    pub skip_recovery: bool,
    /// Extra environment of the server process.
    pub env: Vec<(String, String)>,
    /// `wsrep_provider_options` items added for this start only.
    pub provider_options: Vec<(String, String)>,
    /// Server options (`--key=value`) for this start only, such as
    /// `wsrep_sst_donor`; the options file is left as it is.
    pub server_options: Vec<(String, String)>,
}

/// A recorded cluster. One made by `up` stops the processes it started when
/// dropped; one made by `open` (or after `keep_running`) leaves them alone.
pub struct Cluster {
    state: ClusterState,
    /// Processes this value spawned, kept so they can be reaped (no zombies).
    children: BTreeMap<usize, Child>,
    stop_on_drop: bool,
}

impl Cluster {
    /// Creates a brand-new cluster in `spec.dir` (removing a previous, stopped
    /// one's data) and returns once every node is Synced.
    pub fn up(spec: ClusterSpec) -> Result<Cluster> {
        anyhow::ensure!(spec.nodes >= 1, "a cluster needs at least one node");
        anyhow::ensure!(
            spec.hosts.is_empty() || spec.hosts.len() == spec.nodes,
            "{} hosts given for {} nodes",
            spec.hosts.len(),
            spec.nodes
        );
        anyhow::ensure!(
            spec.provider != ProviderKind::Standalone || spec.nodes == 1,
            "a standalone server (no provider) is a single node"
        );
        anyhow::ensure!(
            spec.provider != ProviderKind::Null || spec.nodes == 1,
            "the null provider orders one node's commits by a counter: a single node"
        );
        let tools = Tools::find()?;
        let provider_path = resolve_provider(spec.provider, spec.provider_path.as_deref())?;
        let dir = prepare_dir(&spec.dir)?;
        let ports = ports::allocate(spec.nodes)?;
        let state = new_state(&spec, dir, provider_path, &ports);
        check_socket_paths(&state)?;
        if state.tls {
            anyhow::ensure!(state.provider != ProviderKind::Standalone, "--tls needs a replicated cluster");
            let names: Vec<String> = state.nodes.iter().map(|n| n.name.clone()).collect();
            certs::generate(&state.dir, &names)?;
        }
        let mut cluster = Cluster { state, children: BTreeMap::new(), stop_on_drop: true };
        cluster.create_nodes(&tools)?;
        cluster.save()?;
        for i in 1..=spec.nodes {
            let started = Instant::now();
            cluster.start_node(i, &Start { bootstrap: i == 1, ..Start::default() })?;
            cluster.wait_synced(i, spec.sync_timeout)?;
            if spec.verbose {
                let took = started.elapsed().as_secs_f64();
                // Not eprintln!: a closed stderr must not panic and tear the cluster down.
                let _ = writeln!(std::io::stderr(), "node{i}: Synced after {took:.1} s");
            }
        }
        Ok(cluster)
    }

    /// Loads the cluster recorded in `dir` without taking ownership of its processes.
    pub fn open(dir: &Path) -> Result<Cluster> {
        let Some(state) = ClusterState::load(dir)? else {
            bail!("no cluster recorded in {} (no {})", dir.display(), state::STATE_FILE)
        };
        Ok(Cluster { state, children: BTreeMap::new(), stop_on_drop: false })
    }

    /// Hands the processes over to whoever reads the state file (the CLI exits after `up`).
    pub fn keep_running(mut self) {
        self.stop_on_drop = false;
    }

    pub fn state(&self) -> &ClusterState {
        &self.state
    }

    pub fn dir(&self) -> &Path {
        &self.state.dir
    }

    pub fn nodes(&self) -> &[Node] {
        &self.state.nodes
    }

    pub fn len(&self) -> usize {
        self.state.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.state.nodes.is_empty()
    }

    /// Node `i` (1-based). Panics on a bad index, like slice indexing.
    pub fn node(&self, i: usize) -> &Node {
        self.node_checked(i).unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn node_checked(&self, i: usize) -> Result<&Node> {
        let n = self.len();
        i.checked_sub(1)
            .and_then(|k| self.state.nodes.get(k))
            .ok_or_else(|| anyhow!("no node {i}: the cluster has nodes 1..={n}"))
    }

    /// Restarts node `i` so that it rejoins the running members. A node with
    /// durable group state (Tandem's log in its data directory) may start
    /// while the others are down: the group forms again once a majority of
    /// its last members is back.
    pub fn start(&mut self, i: usize) -> Result<()> {
        let durable = self.node_checked(i).is_ok_and(|n| has_group_state(&n.datadir));
        if !durable && !self.nodes().iter().any(|n| n.index != i && n.is_running()) {
            bail!(
                "no other node is running, so node {i} has nothing to join: \
                 bootstrap it instead (start-node {i} --bootstrap)"
            );
        }
        self.start_with(i, &Start::default())
    }

    /// Starts node `i` as a new primary component (`--wsrep-new-cluster`),
    /// marking it safe to bootstrap: the caller chose it.
    pub fn start_bootstrap(&mut self, i: usize) -> Result<()> {
        let datadir = self.node_checked(i)?.datadir.clone();
        mark_safe_to_bootstrap(&datadir)?;
        self.start_with(i, &Start { bootstrap: true, ..Start::default() })
    }

    /// Starts node `i` exactly as `how` says, with none of `start`'s checks.
    pub fn start_with(&mut self, i: usize, how: &Start) -> Result<()> {
        self.start_node(i, how)
    }

    /// Graceful stop: SIGTERM, then SIGKILL after `STOP_TIMEOUT`.
    pub fn stop(&mut self, i: usize) -> Result<()> {
        self.stop_node(i, Signal::TERM)
    }

    /// Crash: SIGKILL.
    pub fn kill(&mut self, i: usize) -> Result<()> {
        self.stop_node(i, Signal::KILL)
    }

    pub fn is_running(&mut self, i: usize) -> bool {
        self.reap(i);
        self.node_checked(i).is_ok_and(Node::is_running)
    }

    /// Waits until node `i` reports `wsrep_local_state_comment = Synced` (a
    /// standalone server: until it answers). Fails early if mariadbd exits;
    /// errors carry the tail of its error log.
    pub fn wait_synced(&mut self, i: usize, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        let standalone = self.state.provider == ProviderKind::Standalone;
        let mut last_state = None;
        loop {
            if !self.is_running(i) {
                return Err(self.failure(i, "mariadbd exited before reaching Synced"));
            }
            let node = self.node_checked(i)?;
            if standalone {
                last_state = node.probe_ready().or(last_state);
            } else {
                last_state = node.probe_state().or(last_state);
            }
            if last_state.as_deref() == Some("Synced") {
                return Ok(());
            }
            if start.elapsed() >= timeout {
                let seen = last_state.as_deref().unwrap_or("no answer");
                let what = format!("not Synced after {} s (last state: {seen})", timeout.as_secs());
                return Err(self.failure(i, &what));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Stops every running node (joiners first, bootstrap node last), removes
    /// the state file and, with `purge`, the node directories.
    pub fn down(mut self, purge: bool) -> Result<()> {
        self.stop_on_drop = false;
        self.stop_all()?;
        ClusterState::remove(self.dir())?;
        if purge {
            for node in self.nodes() {
                remove_dir_if_exists(&node.dir)?;
            }
            // Only if nothing else lives there.
            let _ = std::fs::remove_dir(self.dir());
        }
        Ok(())
    }

    fn stop_all(&mut self) -> Result<()> {
        let mut first_error = None;
        for i in (1..=self.len()).rev() {
            if let Err(e) = self.stop_node(i, Signal::TERM) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn save(&self) -> Result<()> {
        self.state.save()
    }

    fn create_nodes(&self, tools: &Tools) -> Result<()> {
        for node in self.nodes() {
            std::fs::create_dir_all(&node.dir).with_context(|| format!("creating {}", node.dir.display()))?;
            std::fs::write(&node.cnf, config::render_cnf(&self.state, node))?;
            if node.index == 1 {
                install_db(tools, node)?;
            } else {
                // A joiner gets everything by SST; mariadbd only needs the directory.
                std::fs::create_dir_all(&node.datadir)?;
            }
        }
        Ok(())
    }

    fn start_node(&mut self, i: usize, how: &Start) -> Result<()> {
        self.reap(i);
        let node = self.node_checked(i)?.clone();
        if node.is_running() {
            bail!("{} is already running (pid {})", node.name, node.pid.unwrap_or(0));
        }
        let mariadbd = find_program("mariadbd")?;
        let replicated = self.state.provider != ProviderKind::Standalone;
        let mut args = mariadbd_args(&node, how.bootstrap && replicated);
        if !how.provider_options.is_empty() {
            let mut state = self.state.clone();
            state.provider_options.extend(how.provider_options.iter().cloned());
            args.push(format!("--wsrep_provider_options={}", config::provider_options(&state, &node)));
        }
        args.extend(how.server_options.iter().map(|(key, value)| format!("--{key}={value}")));
        if replicated && !how.skip_recovery {
            if let Some(position) = recover_position(&mariadbd, &node)? {
                args.push(format!("--wsrep_start_position={position}"));
            }
        }
        let mut env = how.env.clone();
        if let (true, Some(tandem)) = (replicated, sst_script::tandem_binary()) {
            env.push(("PATH".to_string(), sst_script::path_with_script(&self.state.dir, &tandem, &how.env)?));
        }
        let child = process::spawn_detached(&mariadbd, &args, &env, &node.error_log, node.netns.as_deref())?;
        let pid = child.id();
        self.children.insert(i, child);
        self.record_pid(i, Some(pid))
    }

    /// Another `tandem cluster` command may be changing the state file at the
    /// same time: only this node's PID is written, and the others' news read.
    fn record_pid(&mut self, i: usize, pid: Option<u32>) -> Result<()> {
        self.state.nodes[i - 1].pid = pid;
        let merged = ClusterState::record_pid(&self.state.dir, i, pid)?;
        for (mine, theirs) in self.state.nodes.iter_mut().zip(merged.nodes) {
            mine.pid = theirs.pid;
        }
        Ok(())
    }

    fn stop_node(&mut self, i: usize, sig: Signal) -> Result<()> {
        self.reap(i);
        let node = self.node_checked(i)?.clone();
        if let Some(pid) = node.pid.filter(|_| node.is_running()) {
            process::signal(pid, sig)?;
            if !self.wait_exit(i, pid, STOP_TIMEOUT) {
                process::signal(pid, Signal::KILL)?;
                if !self.wait_exit(i, pid, Duration::from_secs(10)) {
                    bail!("{} (pid {pid}) survived SIGKILL", node.name);
                }
            }
        }
        self.record_pid(i, None)
    }

    fn wait_exit(&mut self, i: usize, pid: u32, timeout: Duration) -> bool {
        process::wait_gone(
            || {
                self.reap(i);
                process::is_alive(pid)
            },
            timeout,
        )
    }

    /// Collects the exit status of our own child so it does not linger as a zombie.
    fn reap(&mut self, i: usize) {
        if let Some(child) = self.children.get_mut(&i) {
            if !matches!(child.try_wait(), Ok(None)) {
                self.children.remove(&i);
            }
        }
    }

    fn failure(&self, i: usize, what: &str) -> anyhow::Error {
        let Ok(node) = self.node_checked(i) else {
            return anyhow!("node {i}: {what}");
        };
        let log = &node.error_log;
        let tail = process::tail(log, LOG_TAIL_LINES);
        let mut text = format!("{} {what}; last {LOG_TAIL_LINES} lines of {}:\n{tail}", node.name, log.display());
        // A joiner's failure is often the donor's: its SST script's verdict
        // and errors are in the donor's log, not the joiner's.
        for other in self.state.nodes.iter().filter(|n| n.name != node.name) {
            let lines = process::tail_matching(&other.error_log, PEER_LOG_LINES, |l| {
                l.contains("WSREP_SST") || l.contains("[ERROR]")
            });
            if !lines.is_empty() {
                text.push_str(&format!(
                    "\nlast SST and error lines of {} ({}):\n{lines}",
                    other.name,
                    other.error_log.display()
                ));
            }
        }
        anyhow!(text)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.stop_on_drop {
            return;
        }
        let ours: Vec<usize> = self.children.keys().rev().copied().collect();
        for i in ours {
            // Best effort: a destructor cannot report, and the next node must still stop.
            let _ = self.stop_node(i, Signal::TERM);
        }
    }
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn mariadbd_args(node: &Node, bootstrap: bool) -> Vec<String> {
    let mut args = vec![format!("--defaults-file={}", node.cnf.display())];
    // mariadbd refuses to run as root unless told to.
    if is_root() {
        args.push("--user=root".into());
    }
    if bootstrap {
        args.push("--wsrep-new-cluster".into());
    }
    args
}

fn new_state(spec: &ClusterSpec, dir: PathBuf, provider_path: PathBuf, ports: &[ports::NodePorts]) -> ClusterState {
    let node = |(k, p): (usize, &ports::NodePorts)| {
        let nd = dir.join(format!("node{}", k + 1));
        let host = spec.hosts.get(k);
        Node {
            index: k + 1,
            name: format!("node{}", k + 1),
            sql_port: p.sql,
            base_port: p.base,
            sst_port: p.sst,
            // Galera would refuse the options.
            health_port: (spec.provider == ProviderKind::Tandem).then_some(p.health),
            host: host.map_or_else(state::loopback, |h| h.address.clone()),
            netns: host.and_then(|h| h.netns.clone()),
            segment: host.and_then(|h| h.segment),
            datadir: nd.join("data"),
            socket: nd.join("mysql.sock"),
            cnf: nd.join("my.cnf"),
            error_log: nd.join("error.log"),
            dir: nd,
            pid: None,
        }
    };
    ClusterState {
        version: state::STATE_VERSION,
        dir: dir.clone(),
        provider: spec.provider,
        provider_path,
        slave_threads: spec.slave_threads,
        mysqld_options: spec.mysqld_options.clone(),
        provider_options: spec.provider_options.clone(),
        tls: spec.tls,
        nodes: ports.iter().enumerate().map(node).collect(),
    }
}

/// Creates `dir`, refuses if a cluster recorded there still runs, and clears
/// a previous cluster's node directories so `up` always starts from scratch.
fn prepare_dir(dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = std::fs::canonicalize(dir)?;
    if let Some(old) = ClusterState::load(&dir)? {
        let running: Vec<String> = old
            .nodes
            .iter()
            .filter(|n| n.is_running())
            .map(|n| format!("{} pid {}", n.name, n.pid.unwrap_or(0)))
            .collect();
        if !running.is_empty() {
            bail!(
                "a cluster recorded in {} is still running ({}): run `tandem cluster down --dir {}` first",
                dir.display(),
                running.join(", "),
                dir.display()
            );
        }
    }
    for node_dir in node_dirs(&dir)? {
        refuse_if_stray_server(&node_dir)?;
        remove_dir_if_exists(&node_dir)?;
    }
    ClusterState::remove(&dir)?;
    Ok(dir)
}

/// `dir/node<digits>` directories.
fn node_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let numbered =
            name.strip_prefix("node").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if numbered && entry.file_type()?.is_dir() {
            out.push(entry.path());
        }
    }
    Ok(out)
}

/// A server still running from a lost state file must not have its datadir deleted.
fn refuse_if_stray_server(node_dir: &Path) -> Result<()> {
    let pid_text = std::fs::read_to_string(node_dir.join("mariadbd.pid")).unwrap_or_default();
    let Ok(pid) = pid_text.trim().parse::<u32>() else {
        return Ok(());
    };
    if process::is_our_mariadbd(pid, &node_dir.join("my.cnf")) {
        bail!("mariadbd pid {pid} still runs from {}: stop it first", node_dir.display());
    }
    Ok(())
}

fn check_socket_paths(state: &ClusterState) -> Result<()> {
    for node in &state.nodes {
        let len = node.socket.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            bail!(
                "socket path {} is {len} bytes, more than a unix socket allows ({MAX_SOCKET_PATH}): use a shorter --dir",
                node.socket.display()
            );
        }
    }
    Ok(())
}

fn install_db(tools: &Tools, node: &Node) -> Result<()> {
    let log_path = node.dir.join("install.log");
    let log = std::fs::File::create(&log_path)?;
    let mut cmd = Command::new(&tools.install_db);
    // --no-defaults first: /etc/mysql must not leak in. "normal" root auth gives a
    // password-less root on the socket *and* on 127.0.0.1, which SST and TCP clients use.
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", node.datadir.display()))
        .args(["--auth-root-authentication-method=normal", "--skip-test-db"]);
    if let Some(dir) = crate::basedir::current() {
        cmd.arg(format!("--basedir={}", dir.display()));
    }
    if is_root() {
        cmd.arg("--user=root");
    }
    let status = cmd
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .status()
        .with_context(|| format!("running {}", tools.install_db.display()))?;
    if !status.success() {
        let tail = process::tail(&log_path, LOG_TAIL_LINES);
        bail!("mariadb-install-db failed for {} ({status}):\n{tail}", node.name);
    }
    Ok(())
}

/// What systemd's `galera_recovery` does before every start: after a crash
/// the provider's saved state says seqno -1 and would force a full SST, but
/// InnoDB knows the last committed position, so a restart can use IST.
/// `--wsrep-recover` only opens InnoDB (about 0.1 s here); it is
/// provider-independent, so tandem and Galera nodes restart the same way.
fn recover_position(mariadbd: &Path, node: &Node) -> Result<Option<String>> {
    if !node.datadir.join("ibdata1").exists() {
        return Ok(None); // a joiner that never got its SST has nothing to recover
    }
    let log = node.dir.join("recover.log");
    let _ = std::fs::remove_file(&log);
    let mut cmd = Command::new(mariadbd);
    cmd.arg(format!("--defaults-file={}", node.cnf.display()));
    if is_root() {
        cmd.arg("--user=root");
    }
    cmd.args(["--wsrep-recover".to_string(), format!("--log-error={}", log.display())]);
    let status = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status()?;
    if !status.success() {
        let tail = process::tail(&log, LOG_TAIL_LINES);
        bail!("mariadbd --wsrep-recover failed for {} ({status}):\n{tail}", node.name);
    }
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    Ok(parse_recovered_position(&text))
}

/// The last `WSREP: Recovered position: uuid:seqno` line, unless it is the
/// "nothing known" position.
pub(crate) fn parse_recovered_position(log: &str) -> Option<String> {
    const MARK: &str = "WSREP: Recovered position: ";
    let line = log.lines().rev().find(|l| l.contains(MARK))?;
    let position = line[line.find(MARK)? + MARK.len()..].trim();
    let unknown = position.ends_with(":-1") || position.is_empty();
    (!unknown).then(|| position.to_string())
}

/// Tandem keeps the group's log and the member's identity as files named
/// `*.galera.cache` in the data directory (the default `gcache.dir` and
/// `gcache.name`).
pub fn has_group_state(datadir: &Path) -> bool {
    datadir.join("identity.galera.cache").is_file()
}

/// Galera refuses `--wsrep-new-cluster` from a node whose grastate.dat says
/// it may not be the most advanced one (after a crash); the caller knows better.
pub(crate) fn mark_safe_to_bootstrap(datadir: &Path) -> Result<()> {
    let path = datadir.join("grastate.dat");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    let fixed = text.replace("safe_to_bootstrap: 0", "safe_to_bootstrap: 1");
    if fixed != text {
        std::fs::write(&path, fixed).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn remove_dir_if_exists(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", dir.display()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_null_provider_is_refused_more_than_one_node_before_anything_starts() {
        let tmp = tempfile::tempdir().unwrap();
        let Err(err) = Cluster::up(ClusterSpec::new(tmp.path().join("c"), 3, ProviderKind::Null)) else {
            panic!("a 3-node null cluster started")
        };
        assert!(err.to_string().contains("a single node"), "{err}");
        assert!(!tmp.path().join("c").exists(), "nothing made");
    }

    #[test]
    fn state_from_spec_uses_ports_and_paths() {
        let spec = ClusterSpec::new("/unused", 2, ProviderKind::Galera);
        let ports = [
            ports::NodePorts { sql: 1, base: 2, sst: 4, health: 9 },
            ports::NodePorts { sql: 5, base: 6, sst: 8, health: 10 },
        ];
        let state = new_state(&spec, "/c".into(), "/p.so".into(), &ports);
        assert_eq!(state.nodes[1].index, 2);
        assert_eq!(state.nodes[1].cnf, Path::new("/c/node2/my.cnf"));
        assert_eq!(state.nodes[1].base_port, 6);
        assert_eq!(state.nodes[0].pid, None);
        assert_eq!(state.nodes[1].health_port, None, "Galera has no health.* options");
        let tandem =
            new_state(&ClusterSpec::new("/unused", 2, ProviderKind::Tandem), "/c".into(), "/p.so".into(), &ports);
        assert_eq!(tandem.nodes[1].health_port, Some(10));
    }

    #[test]
    fn prepare_dir_clears_stopped_cluster_but_keeps_other_files() {
        let tmp = tempfile::tempdir().unwrap();
        let mut old = state::sample_state(tmp.path(), 2);
        old.dir = std::fs::canonicalize(tmp.path()).unwrap();
        old.nodes.iter_mut().for_each(|n| n.pid = None);
        old.save().unwrap();
        std::fs::create_dir_all(tmp.path().join("node2/data")).unwrap();
        std::fs::write(tmp.path().join("notes.txt"), "keep").unwrap();
        prepare_dir(tmp.path()).unwrap();
        assert!(!tmp.path().join("node2").exists());
        assert!(!tmp.path().join(state::STATE_FILE).exists());
        assert!(tmp.path().join("notes.txt").exists());
    }

    #[test]
    fn long_socket_paths_are_refused() {
        let long = PathBuf::from(format!("/{}", "d".repeat(120)));
        let state = state::sample_state(&long, 1);
        let err = check_socket_paths(&state).unwrap_err();
        assert!(err.to_string().contains("use a shorter --dir"));
    }

    #[test]
    fn bootstrap_flag_only_for_bootstrap() {
        let state = state::sample_state(Path::new("/d"), 1);
        let args = mariadbd_args(&state.nodes[0], true);
        assert_eq!(args[0], "--defaults-file=/d/node1/my.cnf");
        assert!(args.contains(&"--wsrep-new-cluster".to_string()));
        assert!(!mariadbd_args(&state.nodes[0], false).contains(&"--wsrep-new-cluster".to_string()));
    }

    #[test]
    fn recovered_position_parsing() {
        let uuid = "ae9a5566-e606-11f1-bd48-630ac3af15ef";
        let log = format!("x\n2026-11-21 23:54:02 0 [Note] WSREP: Recovered position: {uuid}:9\n");
        assert_eq!(parse_recovered_position(&log).unwrap(), format!("{uuid}:9"));
        let none = "[Note] WSREP: Recovered position: 00000000-0000-0000-0000-000000000000:-1\n";
        assert_eq!(parse_recovered_position(none), None);
        assert_eq!(parse_recovered_position("no such line"), None);
    }

    #[test]
    fn group_state_is_the_identity_file_in_the_data_directory() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(!has_group_state(tmp.path()));
        // The layout before the files moved into the data directory itself.
        std::fs::create_dir(tmp.path().join("galera.cache")).unwrap();
        std::fs::write(tmp.path().join("galera.cache/identity"), "x").unwrap();
        assert!(!has_group_state(tmp.path()));
        std::fs::write(tmp.path().join("identity.galera.cache"), "x").unwrap();
        assert!(has_group_state(tmp.path()));
    }

    #[test]
    fn safe_to_bootstrap_is_set() {
        let tmp = tempfile::tempdir().unwrap();
        let grastate = tmp.path().join("grastate.dat");
        std::fs::write(&grastate, "version: 2.1\nseqno: -1\nsafe_to_bootstrap: 0\n").unwrap();
        mark_safe_to_bootstrap(tmp.path()).unwrap();
        assert!(std::fs::read_to_string(grastate).unwrap().contains("safe_to_bootstrap: 1"));
        mark_safe_to_bootstrap(&tmp.path().join("missing")).unwrap();
    }
}
