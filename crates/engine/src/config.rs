//! Configuration: the node's own settings, provider options read on the
//! commit path, cluster addresses, and the pieces of the group channel's
//! configuration that options decide (`crate::connection` puts it together).

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tandem_group::{LogSettings, PartitionPolicy, PeerNames, TlsFiles, TlsPolicy, TlsSettings};

use crate::options::Options;
use crate::types::Gtid;

#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub name: String,
    pub node_address: String,
    pub incoming: String,
    pub data_dir: PathBuf,
    pub options: String,
    /// Position of the local data, if known (`wsrep_start_position`).
    pub start_position: Gtid,
    /// `tandem arbitrator`: a voter that keeps the log but has no database.
    /// It never bootstraps, never donates, takes no state transfer (its
    /// application asks for none) and keeps no grastate.dat.
    pub arbitrator: bool,
}

/// Options read on every commit, kept parsed so the commit path takes no
/// global lock for them.
#[derive(Debug, Default)]
pub struct HotOptions {
    max_ws_size: std::sync::atomic::AtomicI64,
    suspect_ms: std::sync::atomic::AtomicU64,
    causal_read_ms: std::sync::atomic::AtomicU64,
    fc_limit: std::sync::atomic::AtomicI64,
    /// f64 bits.
    fc_factor: std::sync::atomic::AtomicU64,
    fc_single_primary: std::sync::atomic::AtomicBool,
    recv_q_soft_limit: std::sync::atomic::AtomicU64,
    /// The applier queue's bound, fixed at startup (`gcs.recv_q_hard_limit`).
    recv_q_bound: std::sync::atomic::AtomicUsize,
    /// `gcs.send_window` as the group reads it (shared with the channel).
    send_window: Arc<std::sync::atomic::AtomicU64>,
    /// `repl.causal_read_lease` (shared with the channel).
    read_lease: Arc<std::sync::atomic::AtomicBool>,
}

impl HotOptions {
    pub(crate) fn from(options: &Options) -> HotOptions {
        let hot = HotOptions::default();
        hot.update(options);
        hot
    }

    pub(crate) fn update(&self, options: &Options) {
        let ms = |key| options.period(key).as_millis() as u64;
        self.max_ws_size.store(options.int("repl.max_ws_size"), Ordering::Relaxed);
        self.suspect_ms.store(ms("evs.suspect_timeout"), Ordering::Relaxed);
        self.causal_read_ms.store(ms("repl.causal_read_timeout"), Ordering::Relaxed);
        let float = |key| options.get(key).parse::<f64>().unwrap_or(0.0).to_bits();
        self.fc_limit.store(options.int("gcs.fc_limit"), Ordering::Relaxed);
        self.fc_factor.store(float("gcs.fc_factor"), Ordering::Relaxed);
        let single = options.bool("gcs.fc_single_primary") || options.bool("gcs.fc_master_slave");
        self.fc_single_primary.store(single, Ordering::Relaxed);
        self.recv_q_soft_limit.store(float("gcs.recv_q_soft_limit"), Ordering::Relaxed);
        self.send_window.store(send_window(options), Ordering::Relaxed);
        self.read_lease.store(options.bool("repl.causal_read_lease"), Ordering::Relaxed);
        if self.recv_q_bound.load(Ordering::Relaxed) == 0 {
            self.recv_q_bound.store(recv_queue_bound(options), Ordering::Relaxed);
        }
    }

    /// Flow control's settings as they are now (`gcs.fc_*`, `gcs.recv_q_*`).
    pub fn flow_control(&self) -> crate::flow_control::Settings {
        let float = |a: &std::sync::atomic::AtomicU64| f64::from_bits(a.load(Ordering::Relaxed));
        crate::flow_control::Settings {
            limit: self.fc_limit.load(Ordering::Relaxed),
            factor: float(&self.fc_factor),
            single_primary: self.fc_single_primary.load(Ordering::Relaxed),
            queue_bound_bytes: self.recv_queue_bound(),
            soft_fraction: float(&self.recv_q_soft_limit),
        }
    }

    /// The send window, shared with the group channel (see [`send_window`]).
    pub fn send_window(&self) -> Arc<std::sync::atomic::AtomicU64> {
        self.send_window.clone()
    }

    /// Whether causal reads may take the leader's lease, shared with the
    /// group channel (`tandem_group::GroupConfig::read_lease`).
    pub fn read_lease(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.read_lease.clone()
    }

    pub fn recv_queue_bound(&self) -> usize {
        self.recv_q_bound.load(Ordering::Relaxed)
    }

    pub fn max_ws_size(&self) -> i64 {
        self.max_ws_size.load(Ordering::Relaxed)
    }

    pub fn suspect(&self) -> Duration {
        Duration::from_millis(self.suspect_ms.load(Ordering::Relaxed))
    }

    pub fn causal_read_timeout(&self) -> Duration {
        Duration::from_millis(self.causal_read_ms.load(Ordering::Relaxed))
    }
}

/// `gcs.send_window`: how many write-sets a member may be behind in
/// receiving the ordered stream before the leader holds new ones back
/// (`tandem_group::send_window`). By default four times the flow-control
/// limit: flow control keeps what a member received and has not applied
/// near the limit, the window keeps what it has not even received near it,
/// and four limits leave room for the writes in flight, so a busy pipeline
/// is not throttled by a member that is only a round trip behind.
pub(crate) fn send_window(options: &Options) -> u64 {
    match options.int("gcs.send_window") {
        n if n < 0 => (4 * options.int("gcs.fc_limit").max(0) as u64).max(16),
        n => n as u64,
    }
}

/// The applier queue's bound in bytes: `gcs.recv_q_hard_limit` when set,
/// else 64 MiB. Past it the group's delivery to this node waits (the rest
/// stays in the log on disk) where Galera would abort the node.
pub(crate) fn recv_queue_bound(options: &Options) -> usize {
    match options.int("gcs.recv_q_hard_limit") {
        n if n <= 0 || n == i64::MAX => crate::queue::DEFAULT_BOUND_BYTES,
        n => usize::try_from(n).unwrap_or(usize::MAX).max(1 << 20),
    }
}

/// The leader's heartbeat period: `evs.keepalive_period`, but at least five
/// heartbeats per `evs.suspect_timeout`. A heartbeat unanswered within one
/// period counts as lost (openraft), and a leader that hears no quorum for
/// `suspect` leaves the primary component; at suspect/20 (250 ms) a leader on
/// two saturated cores missed every answer for 5 s and went non-primary under
/// a read-only load its followers served without trouble.
pub(crate) fn heartbeat_period(keepalive: Duration, suspect: Duration) -> Duration {
    keepalive.min(suspect / 5).max(Duration::from_millis(50))
}

/// Where the group listens: `gmcast.listen_addr` left at its default means
/// the node's address on `base_port`; an explicit one without a port (as
/// `gmcast.listen_addr=127.0.0.2`) takes `base_port` too, as in Galera.
pub(crate) fn listen_address(option: &str, node_host: &str, base_port: i64) -> String {
    if option == "tcp://0.0.0.0:4567" {
        return format!("{node_host}:{base_port}");
    }
    let addr = option.trim_start_matches("tcp://");
    let has_port = match addr.strip_prefix('[') {
        Some(v6) => v6.contains("]:"),
        None => addr.contains(':'),
    };
    if has_port {
        addr.to_string()
    } else {
        format!("{addr}:{base_port}")
    }
}

/// `socket.ssl*` as the group's TLS settings; `None`: plaintext. Relative
/// paths are taken from the data directory (the server's working
/// directory, which Galera's are relative to); the CA defaults to the
/// certificate file, as in Galera.
pub(crate) fn tls_settings(opts: &Options, data_dir: &Path) -> Option<TlsSettings> {
    if !opts.tls() {
        return None;
    }
    let cert = opts.get("socket.ssl_cert");
    let ca = match opts.get("socket.ssl_ca") {
        "" => cert,
        ca => ca,
    };
    Some(TlsSettings {
        files: TlsFiles {
            cert: data_dir.join(cert),
            key: data_dir.join(opts.get("socket.ssl_key")),
            ca: data_dir.join(ca),
        },
        dynamic: opts.bool("socket.dynamic"),
        policy: TlsPolicy {
            peer_names: if opts.bool("socket.ssl_verify_peer_name") { PeerNames::Verified } else { PeerNames::Ignored },
            ciphers: opts.get("socket.ssl_cipher").to_string(),
        },
    })
}

/// `pc.ignore_sb` and `pc.ignore_quorum` as the group's partition policy.
pub(crate) fn partition_policy(opts: &Options) -> PartitionPolicy {
    PartitionPolicy { ignore_split_brain: opts.bool("pc.ignore_sb"), ignore_quorum: opts.bool("pc.ignore_quorum") }
}

/// Smallest segment: purging a few KiB at a time is all overhead.
const MIN_SEGMENT_BYTES: u64 = 1 << 20;

/// The gcache options as the group's log settings. The log is files named
/// `*.<gcache.name>` in `gcache.dir` (default: the data directory): files,
/// because MariaDB takes every directory there for a database; and names
/// ending in `galera.cache`, which MariaDB's SST scripts leave in place when
/// they empty the data directory.
pub(crate) fn log_settings(opts: &Options, data_dir: &Path) -> LogSettings {
    // A relative gcache.dir is relative to the data directory, whatever the
    // server's working directory happens to be.
    let dir = match opts.get("gcache.dir") {
        "" => data_dir.to_path_buf(),
        d => data_dir.join(d),
    };
    let cache_bytes = opts.size("gcache.size").max(MIN_SEGMENT_BYTES);
    let segment_bytes = opts.size("gcache.page_size").min(cache_bytes / 8).max(MIN_SEGMENT_BYTES);
    LogSettings {
        dir: Some(dir),
        name: opts.get("gcache.name").to_string(),
        cache_bytes,
        segment_bytes,
        fsync: opts.bool("gcache.fsync"),
        catch_up_batch_bytes: opts.size("ist.batch_size").max(1),
        ..LogSettings::default()
    }
}

/// `gcomm://host:port,host2` → peers (default port 4567). `gcomm://` alone
/// has no peers: bootstrap.
pub fn parse_cluster_address(url: &str) -> Result<Vec<String>, String> {
    let rest = url.trim().strip_prefix("gcomm://").ok_or_else(|| bad_cluster_address(url))?;
    let rest = rest.split('?').next().unwrap_or("");
    Ok(rest
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| if has_port(p) { p.to_string() } else { format!("{p}:4567") })
        .collect())
}

/// Worded as Galera words it ("Backend not supported", "Invalid backend
/// URI"): operators' tooling and MariaDB's own tests match these phrases.
fn bad_cluster_address(url: &str) -> String {
    let expected = "expected gcomm://host[:port],...";
    match url.trim().split_once("://") {
        Some((scheme, _)) => format!("Backend not supported: {scheme} (cluster address '{url}'; {expected})"),
        None => format!("Invalid backend URI: {url} ({expected})"),
    }
}

fn has_port(addr: &str) -> bool {
    match addr.rsplit_once(':') {
        Some((host, port)) => port.parse::<u16>().is_ok() && (!host.contains(':') || host.ends_with(']')),
        None => false,
    }
}

pub(crate) fn host_of(addr: &str) -> Option<String> {
    let addr = addr.trim();
    if addr.is_empty() {
        return None;
    }
    Some(if has_port(addr) { addr.rsplit_once(':').unwrap().0.to_string() } else { addr.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_listen_address_takes_base_port_when_it_names_none() {
        assert_eq!(listen_address("tcp://0.0.0.0:4567", "10.0.0.5", 4600), "10.0.0.5:4600");
        assert_eq!(listen_address("127.0.0.2", "127.0.0.2", 19004), "127.0.0.2:19004");
        assert_eq!(listen_address("tcp://127.0.0.2", "0.0.0.0", 19004), "127.0.0.2:19004");
        assert_eq!(listen_address("tcp://127.0.0.2:5000", "0.0.0.0", 19004), "127.0.0.2:5000");
        assert_eq!(listen_address("[::1]", "0.0.0.0", 4567), "[::1]:4567");
        assert_eq!(listen_address("tcp://[::1]:4568", "0.0.0.0", 4567), "[::1]:4568");
    }

    #[test]
    fn cluster_addresses() {
        assert_eq!(parse_cluster_address("gcomm://"), Ok(vec![]));
        assert_eq!(
            parse_cluster_address("gcomm://127.0.0.1:4568,host2"),
            Ok(vec!["127.0.0.1:4568".to_string(), "host2:4567".to_string()])
        );
        assert_eq!(parse_cluster_address("gcomm://[::1]:16000"), Ok(vec!["[::1]:16000".to_string()]));
        assert_eq!(
            parse_cluster_address("foo://"),
            Err("Backend not supported: foo (cluster address 'foo://'; expected gcomm://host[:port],...)".into())
        );
        assert_eq!(
            parse_cluster_address("NULL"),
            Err("Invalid backend URI: NULL (expected gcomm://host[:port],...)".into())
        );
        assert_eq!(host_of("127.0.0.1:14567").as_deref(), Some("127.0.0.1"));
        assert_eq!(host_of("10.0.0.1").as_deref(), Some("10.0.0.1"));
    }

    #[test]
    fn pc_ignore_sb_and_ignore_quorum_make_the_partition_policy() {
        let mut opts = Options::default();
        assert_eq!(partition_policy(&opts), PartitionPolicy::default());
        opts.set_at_runtime("pc.ignore_sb=true").expect("settable at runtime");
        assert_eq!(partition_policy(&opts), PartitionPolicy { ignore_split_brain: true, ignore_quorum: false });
        opts.set_at_runtime("pc.ignore_sb=false;pc.ignore_quorum=YES").expect("settable at runtime");
        assert_eq!(partition_policy(&opts), PartitionPolicy { ignore_split_brain: false, ignore_quorum: true });
    }

    #[test]
    fn a_relative_gcache_dir_is_under_the_data_directory() {
        let data = Path::new("/var/lib/mysql");
        let dir_for = |value: &str| {
            let mut opts = Options::default();
            opts.set_default("gcache.dir", value);
            log_settings(&opts, data).dir.expect("a directory")
        };
        assert_eq!(dir_for(""), PathBuf::from("/var/lib/mysql"));
        assert_eq!(dir_for("cache"), PathBuf::from("/var/lib/mysql/cache"));
        assert_eq!(dir_for("/srv/gcache"), PathBuf::from("/srv/gcache"));
    }

    #[test]
    fn heartbeat_follows_keepalive_with_five_per_suspect_timeout() {
        let ms = Duration::from_millis;
        // Galera's defaults: keepalive PT1S, suspect PT5S.
        assert_eq!(heartbeat_period(ms(1000), ms(5000)), ms(1000));
        // The test suites' PT3S suspect timeout: five heartbeats in it.
        assert_eq!(heartbeat_period(ms(1000), ms(3000)), ms(600));
        assert_eq!(heartbeat_period(ms(200), ms(5000)), ms(200));
        assert_eq!(heartbeat_period(ms(1), ms(100)), ms(50));
    }
}
