//! What proxies and monitoring ask a node, answered by the provider itself:
//! no xinetd, no clustercheck script, no exporter daemon.
//!
//! - [`policy`]: whether a node may take traffic (Galera's clustercheck
//!   rule) and the HAProxy agent-check answer with a lag-aware weight. Pure.
//! - [`metrics`]: `wsrep_*` status in Prometheus' text format. Pure.
//! - [`http`]: the small part of HTTP/1.x a health checker speaks. Pure.
//! - [`server`]: the listeners, their threads and their limits.
//! - [`sst_progress`]: a joiner's state transfer, as its SST process tells it.
//!
//! Knows nothing of the engine: the provider hands it a [`policy::Snapshot`]
//! and the status list on every request.

pub mod http;
pub mod metrics;
pub mod policy;
pub mod server;
pub mod sst_progress;
