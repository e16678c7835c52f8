//! `SHOW STATUS LIKE 'wsrep_%'`: the provider's variables, in Galera's order
//! (tools and the MTR suite expect that order), with real values.

use std::sync::atomic::Ordering::Relaxed;

use crate::node::Node;
use crate::stats::{get, StatValue};
use crate::types::Seqno;

/// Protocol versions we report; the server requires proto_ver <= 4 in views.
pub const PROTOCOL_VERSION: i64 = 4;

/// What a health check asks, cheaper than the whole status list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Readiness {
    pub state: crate::core::LocalState,
    pub primary: bool,
    /// Write-sets ordered by the group that this node has not applied:
    /// queued for its appliers, or not even delivered to it yet.
    pub lag: u64,
    /// Milliseconds the oldest write-set delivered here has waited for its
    /// appliers.
    pub lag_ms: u64,
}

impl Node {
    pub fn readiness(&self) -> Readiness {
        let (state, primary) = {
            let core = self.inner.core.lock();
            (core.state(), core.is_primary())
        };
        let lag_ms = u64::try_from(self.inner.queue.oldest_wait().as_millis()).unwrap_or(u64::MAX);
        Readiness { state, primary, lag: self.write_sets_behind() as u64, lag_ms }
    }

    /// The IST this process received or is receiving; `None` when it
    /// joined otherwise.
    pub fn ist_progress(&self) -> Option<IstProgress> {
        let range = self.inner.core.lock().ist_range();
        range.map(|range| IstProgress::new(range, self.inner.apply.last_left()))
    }

    /// Local commit latency and apply latency, in that order.
    pub fn latencies(&self) -> [crate::stats::LatencySnapshot; 2] {
        let s = &self.inner.stats;
        [s.commit_latency.snapshot(), s.apply_latency.snapshot()]
    }

    /// `wsrep_gmcast_segment`: this node's site, as its options give it.
    fn segment(&self) -> u8 {
        crate::options::parse_segment(self.inner.options.lock().get("gmcast.segment")).unwrap_or(0)
    }

    /// `wsrep_cluster_weight` while primary: what the members weigh.
    fn cluster_weight(&self) -> Option<u64> {
        self.group()?.cluster_weight()
    }

    pub fn status(&self) -> Vec<(&'static str, StatValue)> {
        use StatValue::{Double, Int, Str};
        let inner = &self.inner;
        let s = &inner.stats;
        let (state, uuid, incoming, members, desyncs, primary, ist) = {
            let core = inner.core.lock();
            let incoming = core.members().iter().map(|m| m.incoming.as_str()).collect::<Vec<_>>().join(",");
            (
                core.state(),
                core.group_uuid(),
                incoming,
                core.members().len(),
                core.desyncs(),
                core.is_primary(),
                core.ist_range().filter(|_| core.ist_receiving()),
            )
        };
        let recv_queue = inner.queue.len() as i64;
        let (queue_min, queue_avg) = s.queue_min_avg();
        let flow = inner.flow.status(&inner.hot.flow_control());
        let yes_no = |b: bool| Str(if b { "true" } else { "false" }.into());
        let last_committed = inner.apply.last_left();
        let cache = self.group().map(|g| g.cache()).unwrap_or_default();
        let links = self.group().map(|g| g.links()).unwrap_or_default();
        let cached_downto = crate::retention::cached_downto(cache.replay_from, last_committed);
        vec![
            ("local_state_uuid", Str(uuid.to_string())),
            ("protocol_version", Int(PROTOCOL_VERSION)),
            ("protocol_application", Int(1)),
            ("protocol_replicator", Int(1)),
            ("protocol_GCS", Int(1)),
            ("last_committed", Int(inner.apply.last_left())),
            ("replicated", Int(get(&s.replicated))),
            ("replicated_bytes", Int(get(&s.replicated_bytes))),
            ("repl_keys", Int(get(&s.repl_keys))),
            ("repl_keys_bytes", Int(get(&s.repl_keys_bytes))),
            ("repl_data_bytes", Int(get(&s.repl_data_bytes))),
            ("repl_other_bytes", Int(0)),
            ("received", Int(get(&s.received))),
            ("received_bytes", Int(get(&s.received_bytes))),
            ("local_commits", Int(get(&s.local_commits))),
            ("local_cert_failures", Int(get(&s.local_cert_failures))),
            ("local_replays", Int(get(&s.local_replays))),
            ("local_bf_aborts", Int(get(&s.local_bf_aborts))),
            ("local_send_queue", Int(0)),
            ("local_send_queue_max", Int(1)),
            ("local_send_queue_min", Int(0)),
            ("local_send_queue_avg", Double(0.0)),
            ("local_recv_queue", Int(recv_queue)),
            ("local_recv_queue_max", Int(s.recv_queue_max.load(Relaxed).max(1))),
            ("local_recv_queue_min", Int(queue_min)),
            ("local_recv_queue_avg", Double(queue_avg)),
            ("local_cached_downto", Int(cached_downto)),
            ("flow_control_paused_ns", Int(i64::try_from(flow.paused_ns).unwrap_or(i64::MAX))),
            ("flow_control_paused", Double(flow.paused_fraction)),
            ("flow_control_sent", Int(get(&s.flow_control_sent))),
            ("flow_control_recv", Int(get(&s.flow_control_recv))),
            ("flow_control_active", yes_no(flow.active)),
            ("flow_control_requested", yes_no(flow.requested)),
            ("cert_deps_distance", Double(s.deps_distance())),
            ("apply_oooe", Double(0.0)),
            ("apply_oool", Double(0.0)),
            ("apply_window", Double(0.0)),
            ("apply_waits", Int(get(&s.apply_waits))),
            ("commit_oooe", Double(0.0)),
            ("commit_oool", Double(0.0)),
            ("commit_window", Double(0.0)),
            ("local_state", Int(state.number())),
            ("local_state_comment", Str(state.comment().into())),
            ("cert_index_size", Int(0)),
            ("causal_reads", Int(get(&s.causal_reads))),
            ("cert_interval", Double(0.0)),
            ("open_transactions", Int(inner.local.open.lock().len() as i64)),
            ("open_connections", Int(0)),
            ("incoming_addresses", Str(incoming)),
            ("cluster_weight", Int(if primary { self.cluster_weight().unwrap_or(members as u64) as i64 } else { 0 })),
            ("desync_count", Int(desyncs as i64)),
            ("evs_delayed", Str(String::new())),
            ("evs_evict_list", Str(String::new())),
            ("evs_repl_latency", Str("0/0/0/0/0".into())),
            ("evs_state", Str(if primary { "OPERATIONAL" } else { "GATHER" }.into())),
            ("gcomm_uuid", Str(self.node_id().to_string())),
            ("gmcast_segment", Int(self.segment() as i64)),
            // Not Galera's: PXC's IST progress, and what the cache holds.
            ("ist_receive_status", Str(ist.map(|r| IstProgress::new(r, last_committed).text()).unwrap_or_default())),
            ("gcache_pool_size", Int(cache.bytes as i64)),
            ("gcache_reach_seqnos", Int(if cached_downto < 0 { 0 } else { last_committed - cached_downto + 1 })),
            (
                "gcache_reach_seconds",
                Int(reach_seconds(self.inner.options.lock().size("gcache.size"), cache.append_rate)),
            ),
            // PXC's: the queue lengths that pause and resume replication.
            ("flow_control_interval", Str(flow.limits.interval_text())),
            // Not Galera's: the write-set bytes waiting for the appliers.
            ("local_recv_queue_bytes", Int(inner.queue.bytes() as i64)),
            ("local_recv_queue_bytes_max", Int(s.recv_queue_bytes_max.load(Relaxed))),
            // Not Galera's: how each link of the group channel is carried.
            ("group_links", Str(links_text(&links))),
            // Not Galera's (whose group has no leader): the member that
            // orders the group's messages now, "" while none is known.
            ("group_leader", Str(self.group().and_then(|g| g.status().leader_name).unwrap_or_default())),
        ]
    }
}

/// "node2 TLS, node3 plaintext": each other member and how the last
/// connection with it went ("-": none yet). Every member keeps one open to
/// every other (the group crate's `mesh`).
fn links_text(links: &[tandem_group::Link]) -> String {
    let how = |l: &tandem_group::Link| match l.encrypted {
        Some(true) => "TLS",
        Some(false) => "plaintext",
        None => "-",
    };
    links.iter().map(|l| format!("{} {}", l.name, how(l))).collect::<Vec<_>>().join(", ")
}

/// An IST's seqnos `first..=last`, and how many of them are applied:
/// `wsrep_ist_receive_status` in words, the `tandem_ist_*` metrics in numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IstProgress {
    pub first: Seqno,
    pub last: Seqno,
    /// Write-sets of the IST applied, 0..=`total`.
    pub done: i64,
    /// Write-sets in the IST (at least 1).
    pub total: i64,
}

impl IstProgress {
    fn new((first, last): (Seqno, Seqno), committed: Seqno) -> IstProgress {
        let total = (last - first + 1).max(1);
        IstProgress { first, last, done: (committed - first + 1).clamp(0, total), total }
    }

    /// PXC's format: "52% complete, received seqno 1200 of 1001-1400".
    fn text(&self) -> String {
        let (first, last) = (self.first, self.last);
        format!(
            "{}% complete, received seqno {} of {first}-{last}",
            self.done * 100 / self.total,
            first - 1 + self.done
        )
    }
}

/// How long a node may stay down and still rejoin by IST at the current
/// write rate: the time it takes to write `gcache.size` bytes. -1: no
/// writes in the last minute (the window is not bounded by writes).
fn reach_seconds(cache_bytes: u64, bytes_per_second: u64) -> i64 {
    if bytes_per_second == 0 {
        return -1;
    }
    (cache_bytes / bytes_per_second) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ist_status_reads_like_pxc() {
        let text = |committed| IstProgress::new((1001, 1400), committed).text();
        assert_eq!(text(1200), "50% complete, received seqno 1200 of 1001-1400");
        assert_eq!(text(1400), "100% complete, received seqno 1400 of 1001-1400");
        assert_eq!(text(900), "0% complete, received seqno 1000 of 1001-1400");
        // Past the range (writes after the IST), it stays complete.
        assert_eq!(text(1500), "100% complete, received seqno 1400 of 1001-1400");
        let p = IstProgress::new((1001, 1400), 1200);
        assert_eq!((p.done, p.total), (200, 400));
    }

    #[test]
    fn reach_is_the_time_to_fill_the_cache() {
        assert_eq!(reach_seconds(128 << 20, 1 << 20), 128);
        assert_eq!(reach_seconds(128 << 20, 0), -1);
    }
}
