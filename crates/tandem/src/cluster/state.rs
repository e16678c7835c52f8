//! The state file `D/cluster.json`: what `up` started, so that later commands
//! (`status`, `down`, `start-node`, ...) and other processes can find it.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const STATE_FILE: &str = "cluster.json";
/// Bumped when the layout changes incompatibly.
pub const STATE_VERSION: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// libtandem.so (this project).
    Tandem,
    /// Codership's libgalera_smm.so, for comparison.
    Galera,
    /// No provider, wsrep off: one plain MariaDB (the benchmark's upper limit).
    Standalone,
    /// libtandem_null.so (crates/null-provider, built by `make build`, never
    /// packaged): one node whose commits are ordered by a local counter, so
    /// what it costs is the server's own wsrep work, the floor every
    /// provider is measured against. One node only.
    Null,
}

impl ProviderKind {
    /// A target of one node only: the standalone server and the null
    /// provider. Cells of several nodes leave them out.
    pub fn one_node_only(self) -> bool {
        matches!(self, ProviderKind::Standalone | ProviderKind::Null)
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ProviderKind::Tandem => "tandem",
            ProviderKind::Galera => "galera",
            ProviderKind::Standalone => "standalone",
            ProviderKind::Null => "null",
        })
    }
}

/// One node as recorded; all paths are absolute.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// 1-based, as in `nodeN` and the CLI.
    pub index: usize,
    pub name: String,
    pub sql_port: u16,
    pub base_port: u16,
    pub sst_port: u16,
    /// A Tandem node's health check and `/metrics` (`health.address`); the
    /// next port is its agent check. None: Galera, or a cluster made before.
    #[serde(default)]
    pub health_port: Option<u16>,
    /// The address the node's group, SST and SQL listeners bind to, and
    /// the others reach it at.
    #[serde(default = "loopback")]
    pub host: String,
    /// The network namespace its mariadbd runs in (`ip netns exec`); None:
    /// the caller's own. Made and removed by whoever made the cluster.
    #[serde(default)]
    pub netns: Option<String>,
    /// Its site, given to the provider as `gmcast.segment`; None: left out.
    #[serde(default)]
    pub segment: Option<u8>,
    pub dir: PathBuf,
    pub datadir: PathBuf,
    pub socket: PathBuf,
    pub cnf: PathBuf,
    pub error_log: PathBuf,
    /// PID of the running mariadbd, None once stopped.
    pub pid: Option<u32>,
}

pub fn loopback() -> String {
    "127.0.0.1".to_string()
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    pub version: u32,
    pub dir: PathBuf,
    pub provider: ProviderKind,
    pub provider_path: PathBuf,
    pub slave_threads: usize,
    /// Extra `[mysqld]` options, in command-line order.
    pub mysqld_options: Vec<(String, String)>,
    /// Extra `wsrep_provider_options` items, in command-line order.
    pub provider_options: Vec<(String, String)>,
    /// The group channel is encrypted with the certificates in `dir/tls`
    /// (`up --tls`).
    #[serde(default)]
    pub tls: bool,
    pub nodes: Vec<Node>,
}

impl ClusterState {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(STATE_FILE)
    }

    /// Loads `dir/cluster.json`; Ok(None) when there is none.
    pub fn load(dir: &Path) -> Result<Option<ClusterState>> {
        let path = Self::path(dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let state: ClusterState = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a tandem cluster state file", path.display()))?;
        anyhow::ensure!(
            state.version == STATE_VERSION,
            "{} has version {}, this tandem understands {STATE_VERSION}",
            path.display(),
            state.version
        );
        Ok(Some(state))
    }

    /// Writes atomically (temp file + rename) so a reader never sees half a file.
    pub fn save(&self) -> Result<()> {
        let path = Self::path(&self.dir);
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(&tmp, text + "\n").with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
        Ok(())
    }

    /// Records one node's PID. Several commands may run on one cluster at
    /// once (a `start-node` per node after a whole-cluster crash): each
    /// changes only its own node's entry, re-read under an exclusive lock,
    /// so none overwrites what another recorded. Returns the merged state.
    pub fn record_pid(dir: &Path, index: usize, pid: Option<u32>) -> Result<ClusterState> {
        let lock_path = dir.join(format!("{STATE_FILE}.lock"));
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("opening {}", lock_path.display()))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
            .with_context(|| format!("locking {}", lock_path.display()))?;
        let mut state = Self::load(dir)?.with_context(|| format!("{} disappeared", Self::path(dir).display()))?;
        let node = state
            .nodes
            .get_mut(index.wrapping_sub(1))
            .with_context(|| format!("no node {index} in {}", Self::path(dir).display()))?;
        node.pid = pid;
        state.save()?;
        Ok(state)
    }

    pub fn remove(dir: &Path) -> Result<()> {
        match std::fs::remove_file(Self::path(dir)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
pub(crate) fn sample_state(dir: &Path, nodes: usize) -> ClusterState {
    let node = |i: usize| {
        let nd = dir.join(format!("node{i}"));
        Node {
            index: i,
            name: format!("node{i}"),
            sql_port: 21000 + i as u16,
            base_port: 23000 + 10 * i as u16,
            sst_port: 25000 + i as u16,
            health_port: None,
            host: loopback(),
            netns: None,
            segment: None,
            datadir: nd.join("data"),
            socket: nd.join("mysql.sock"),
            cnf: nd.join("my.cnf"),
            error_log: nd.join("error.log"),
            dir: nd,
            pid: Some(4000 + i as u32),
        }
    };
    ClusterState {
        version: STATE_VERSION,
        dir: dir.to_path_buf(),
        provider: ProviderKind::Galera,
        provider_path: "/usr/lib/galera/libgalera_smm.so".into(),
        slave_threads: 4,
        mysqld_options: vec![("innodb_flush_log_at_trx_commit".into(), "2".into())],
        provider_options: vec![("gcache.size".into(), "32M".into())],
        tls: false,
        nodes: (1..=nodes).map(node).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let tmp = tempfile::tempdir().unwrap();
        let state = sample_state(tmp.path(), 3);
        state.save().unwrap();
        let back = ClusterState::load(tmp.path()).unwrap().unwrap();
        assert_eq!(back, state);
        assert!(!tmp.path().join("cluster.json.tmp").exists());
    }

    #[test]
    fn a_state_file_from_before_hosts_reads_as_loopback() {
        let tmp = tempfile::tempdir().unwrap();
        let state = sample_state(tmp.path(), 2);
        let mut json: serde_json::Value = serde_json::to_value(&state).unwrap();
        for node in json["nodes"].as_array_mut().unwrap() {
            let node = node.as_object_mut().unwrap();
            assert!(node.remove("host").is_some() && node.remove("netns").is_some());
        }
        std::fs::write(ClusterState::path(tmp.path()), json.to_string()).unwrap();
        let back = ClusterState::load(tmp.path()).unwrap().unwrap();
        assert_eq!(back, state);
        assert!(back.nodes.iter().all(|n| n.host == "127.0.0.1" && n.netns.is_none()));
    }

    #[test]
    fn pids_recorded_by_concurrent_commands_are_all_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let mut state = sample_state(tmp.path(), 3);
        state.nodes.iter_mut().for_each(|n| n.pid = None);
        state.save().unwrap();
        let writers: Vec<_> = (1..=3)
            .map(|i| {
                let dir = tmp.path().to_path_buf();
                std::thread::spawn(move || {
                    for round in 0..30u32 {
                        ClusterState::record_pid(&dir, i, Some(1000 * i as u32 + round)).unwrap();
                    }
                })
            })
            .collect();
        writers.into_iter().for_each(|w| w.join().unwrap());
        let back = ClusterState::load(tmp.path()).unwrap().unwrap();
        let pids: Vec<_> = back.nodes.iter().map(|n| n.pid).collect();
        assert_eq!(pids, vec![Some(1029), Some(2029), Some(3029)], "no command lost another's update");
        assert!(ClusterState::record_pid(tmp.path(), 4, None).is_err(), "an unknown node is an error");
    }

    #[test]
    fn missing_file_is_none_and_remove_is_idempotent() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(ClusterState::load(tmp.path()).unwrap().is_none());
        ClusterState::remove(tmp.path()).unwrap();
    }

    #[test]
    fn garbage_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(STATE_FILE), "{ nope").unwrap();
        let err = ClusterState::load(tmp.path()).unwrap_err();
        assert!(format!("{err:#}").contains("not a tandem cluster state file"));
    }

    #[test]
    fn provider_serializes_lowercase() {
        let json = serde_json::to_string(&ProviderKind::Tandem).unwrap();
        assert_eq!(json, "\"tandem\"");
    }
}
