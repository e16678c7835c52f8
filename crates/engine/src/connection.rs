//! A node's connection to its group: `connect` (where the local data
//! starts from, the group's configuration, the replica the group drives),
//! the ticker thread, and `shutdown`, after which no thread of ours runs.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tandem_group::{Admission, GroupConfig, MemberInfo, Timeouts};

use crate::config::{
    heartbeat_period, host_of, listen_address, log_settings, parse_cluster_address, partition_policy, tls_settings,
};
use crate::core::NodeCore;
use crate::dispatch::NodeReplica;
use crate::message::JoinInfo;
use crate::node::{ConnectError, Node, ARBITRATOR_CANNOT_BOOTSTRAP};
use crate::saved_state::{local_data, LocalData, SavedState, NOT_SAFE_TO_BOOTSTRAP};
use crate::types::{Gtid, Seqno, Uuid};

/// How often the ticker runs the core's timers.
const TICK: Duration = Duration::from_millis(100);

/// How often the ticker looks at the receive queue between the applier's
/// pops and the group's pushes, which are what normally trigger flow
/// control: a slow applier pops seldom, and on busy cores the group's
/// delivery to this node can stall while its log keeps receiving, so
/// without a look of its own a node saw its queue go over the limit only
/// once a burst was delivered (on 2 cores: first seen at 78 write-sets
/// against a limit of 27). Only while something is behind: an idle node
/// looks at each `TICK`, and the first push or pop that finds work wakes
/// the ticker back to this pace (`Ticker::busy`).
const FLOW_TICK: Duration = Duration::from_millis(10);

impl Node {
    /// Joins (or founds) the group. Returns at once: everything else arrives
    /// through `recv()`.
    pub fn connect(&self, cluster_name: &str, url: &str, donors: &str, bootstrap: bool) -> Result<(), ConnectError> {
        let peers = parse_cluster_address(url).map_err(ConnectError::Failed)?;
        let bootstrap = bootstrap || peers.is_empty() || self.inner.bootstrap_at_connect;
        let start = self.check_start(bootstrap)?;
        let mut config = self.group_config(cluster_name, peers, bootstrap);
        config.resume_at = (start.seqno >= 0).then_some(start.seqno);
        config.history = (start.uuid != Uuid::NIL).then_some(start.uuid.0);
        config.donors = donors.to_string();
        if bootstrap && start.seqno < 0 {
            // As Galera: bootstrapping data of no known position starts a new
            // history, and the old log describes nothing this node holds.
            config.start_anew = Some(
                "this node bootstraps a new cluster from data with no saved position (no grastate.dat or \
                 wsrep_start_position), which starts a new history"
                    .into(),
            );
        }
        let (listen, name) = (config.listen_addr.clone(), config.me.name.clone());
        let starter = (self.inner.factory)(config).map_err(|e| ConnectError::Failed(e.to_string()))?;
        let identity = starter.identity();
        let (me, incarnation) = (Uuid(identity.uuid), identity.incarnation);
        self.inner.id.set(me, incarnation);
        self.inner.closing.store(false, Ordering::Release);
        self.inner.queue.reopen();
        self.inner.apply.reopen();
        self.inner.commit.reopen();
        {
            let mut core = self.inner.core.lock();
            *core = NodeCore::new(me, incarnation, start, donors.to_string(), !self.inner.config.arbitrator);
        }
        let freeze = self.inner.options.lock().get("gcache.freeze_purge_at_seqno").to_string();
        self.freeze_purge_at_start(&freeze);
        log::info!(
            "Connecting to cluster '{cluster_name}' at '{url}' as {name} ({me}, incarnation {incarnation}{}; node id {}), listening on {listen}{}",
            if identity.restored { ", restored" } else { "" },
            crate::view::node_id(me, incarnation),
            if bootstrap { ", bootstrapping a new cluster" } else { "" }
        );
        let app = JoinInfo {
            incarnation,
            position: start,
            arbitrator: self.inner.config.arbitrator,
            inherited_last_write: if bootstrap { self.inherited_last_write(start) } else { None },
        }
        .encode();
        let replica = NodeReplica::new(self.clone());
        let group = starter.start(app, Box::new(replica)).map_err(|e| ConnectError::Failed(e.to_string()))?;
        *self.inner.group.lock() = Some(group);
        // Messages of an earlier connection's last moments are not ours to send now.
        drop(self.inner.outbox.take_now());
        self.start_ticker();
        Ok(())
    }

    /// A founder on data from Galera: what Galera's cache (`gcache.name` in
    /// `gcache.dir`) says of the seqnos below its position (`inherited.rs`).
    fn inherited_last_write(&self, start: Gtid) -> Option<Seqno> {
        let opts = self.inner.options.lock().clone();
        let log = log_settings(&opts, &self.inner.config.data_dir);
        let path = log.dir.map(|dir| dir.join(&log.name))?;
        crate::inherited::inherited_last_write(&path, start)
    }

    /// Where the local data starts from, or why this node must not connect:
    /// Galera refuses to bootstrap from a node that was not the last to
    /// leave, and no node joins on a guessed position.
    fn check_start(&self, bootstrap: bool) -> Result<Gtid, ConnectError> {
        if self.inner.config.arbitrator {
            if bootstrap {
                log::error!("{ARBITRATOR_CANNOT_BOOTSTRAP}");
                return Err(ConnectError::Refused(ARBITRATOR_CANNOT_BOOTSTRAP.into()));
            }
            return Ok(Gtid::UNDEFINED);
        }
        let saved = SavedState::load(&self.inner.config.data_dir);
        if bootstrap && saved.is_some_and(|s| !s.safe_to_bootstrap && !s.position.uuid.is_nil()) {
            log::error!("{NOT_SAFE_TO_BOOTSTRAP}");
            return Err(ConnectError::Refused(NOT_SAFE_TO_BOOTSTRAP.into()));
        }
        match local_data(self.current_position(), saved) {
            LocalData::Known(position) => Ok(position),
            LocalData::Fresh => Ok(Gtid::UNDEFINED),
            LocalData::Unknown { history } => self.unknown_position(history),
            LocalData::Inconsistent { history, at } => {
                log::info!(
                    "This node left the cluster as inconsistent at {}: a full state transfer replaces its data",
                    Gtid { uuid: history, seqno: at }
                );
                // Kept until the transfer is in: a crash before it must not
                // let the old data join.
                self.inner.inconsistency.mark(at);
                Ok(Gtid::UNDEFINED)
            }
        }
    }

    /// Where the server's data is now: the position it gave at start, or,
    /// once this process has been in a group (the server reconnects with
    /// `SET GLOBAL wsrep_cluster_address`), what it committed there. The
    /// start position is stale by then: resuming at it replayed views and
    /// write-sets the server already had (MTR galera_var_cluster_address).
    fn current_position(&self) -> Gtid {
        let core = self.inner.core.lock();
        if core.ended_in_step() {
            Gtid { uuid: core.group_uuid(), seqno: self.inner.apply.last_left() }
        } else {
            self.inner.config.start_position
        }
    }

    fn unknown_position(&self, history: Uuid) -> Result<Gtid, ConnectError> {
        if self.inner.options.lock().get("repl.unknown_position").eq_ignore_ascii_case("sst") {
            log::warn!(
                "The position of this node's data in history {history} is unknown; a full state transfer \
                 replaces it (repl.unknown_position=sst)"
            );
            return Ok(Gtid::UNDEFINED);
        }
        let why = format!(
            "The position of this node's data in history {history} is unknown: it did not shut down cleanly \
             (grastate.dat has seqno -1), the server passed no wsrep_start_position, and `mariadbd \
             --wsrep-recover` could not read it. Joining on a guess could skip or repeat transactions, so \
             this node does not join. To fix: run `mariadbd --wsrep-recover` and start with \
             --wsrep_start_position=<uuid:seqno> (the systemd unit's galera_recovery and `tandem cluster \
             start-node` do this), or let a full state transfer replace this node's data: \
             wsrep_provider_options='repl.unknown_position=sst'"
        );
        log::error!("{why}");
        Err(ConnectError::Refused(why))
    }

    /// Stops everything for good (provider `free`): no thread of ours may
    /// run once it returns.
    pub fn shutdown(&self) {
        self.inner.closing.store(true, Ordering::Release);
        self.inner.core.lock().close();
        self.inner.inconsistency.join_leaver();
        self.stop_ticker();
        let group = self.inner.group.lock().take();
        if let Some(group) = group {
            group.shutdown();
        }
        self.end_applying();
    }

    /// Ticker threads still running: the library is unmapped right after
    /// the provider's `free`, so none may outlive `shutdown` (tests check).
    pub fn ticker_threads(&self) -> usize {
        self.inner.ticker.threads()
    }

    fn start_ticker(&self) {
        let node = self.clone();
        self.inner.ticker.start(move || {
            let mut last_tick = std::time::Instant::now();
            let mut last_flow = std::time::Instant::now();
            let mut quiet = crate::quiet::QuietWatch::default();
            while !node.inner.closing.load(Ordering::Acquire) {
                // Read after each wait: a push that found work while the
                // ticker idled woke it and set the fast pace again.
                let left = node.inner.ticker.look_every(FLOW_TICK, TICK).saturating_sub(last_flow.elapsed());
                if node.inner.outbox.wait(left.min(TICK.saturating_sub(last_tick.elapsed()))) {
                    node.send_queued();
                }
                let look_every = node.inner.ticker.look_every(FLOW_TICK, TICK);
                if last_flow.elapsed() < look_every && last_tick.elapsed() < TICK {
                    continue;
                }
                last_flow = std::time::Instant::now();
                node.ticker_looks_at_queue();
                if last_tick.elapsed() < TICK {
                    continue;
                }
                last_tick = std::time::Instant::now();
                let committed = node.inner.apply.last_left();
                let commands = node.inner.core.lock().on_tick(node.now_ms(), committed);
                node.execute(commands);
                node.tick_flow_control();
                if quiet.on_tick(committed, node.now_ms()) {
                    node.inner.app.quiet();
                }
            }
        });
    }

    /// The group channel's configuration, from the options and this
    /// node's settings.
    fn group_config(&self, cluster_name: &str, peers: Vec<String>, bootstrap: bool) -> GroupConfig {
        let opts = self.inner.options.lock();
        let host = host_of(&self.inner.config.node_address).unwrap_or_else(|| "0.0.0.0".into());
        let port = opts.int("base_port");
        let listen_addr = listen_address(opts.get("gmcast.listen_addr"), &host, port);
        let advertised_host = if host == "0.0.0.0" { "127.0.0.1".to_string() } else { host };
        let suspect = opts.period("evs.suspect_timeout");
        let timeouts = Timeouts {
            heartbeat: heartbeat_period(opts.period("evs.keepalive_period"), suspect),
            suspect,
            inactive: opts.period("evs.inactive_timeout"),
        };
        let log = log_settings(&opts, &self.inner.config.data_dir);
        let start = self.inner.config.start_position;
        GroupConfig {
            cluster_name: cluster_name.to_string(),
            listen_addr: listen_addr.clone(),
            peers,
            bootstrap,
            me: MemberInfo {
                // Both are the identity's, filled in by the group.
                uuid: [0; 16],
                name: self.inner.config.name.clone(),
                group_addr: format!("{advertised_host}:{}", listen_addr.rsplit(':').next().unwrap_or("4567")),
                incoming: self.inner.config.incoming.clone(),
                app: vec![],
                weight: crate::options::parse_weight(opts.get("pc.weight")).unwrap_or(1),
                segment: crate::options::parse_segment(opts.get("gmcast.segment")).unwrap_or(0),
                leader_segment: crate::options::parse_leader_segment(opts.get("pc.leader_segment")).flatten(),
            },
            timeouts,
            log,
            resume_at: (start.seqno >= 0).then_some(start.seqno),
            start_anew: None,
            history: None,
            tls: tls_settings(&opts, &self.inner.config.data_dir),
            admission: Some(self.admission()),
            partition: partition_policy(&opts),
            send_window: self.inner.hot.send_window(),
            read_lease: self.inner.hot.read_lease(),
            threads: opts.int("gcomm.threads").max(1) as usize,
            wires: None,
            donors: String::new(),
        }
    }

    /// The server's allowlist, asked for each connection to the group port.
    fn admission(&self) -> Admission {
        let app = self.inner.app.clone();
        Admission(Arc::new(move |ip| app.peer_allowed(&ip.to_string())))
    }
}
