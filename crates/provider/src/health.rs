//! The node's health check, HAProxy agent check and Prometheus metrics
//! (`health.*` options), answered from the engine's state by the listeners
//! of `tandem-health`.

use std::sync::Arc;

use tandem_engine::core::LocalState;
use tandem_engine::node::Node;
use tandem_engine::options::parse_bool;
use tandem_engine::stats::{LatencySnapshot, StatValue, LATENCY_BOUNDS};
use tandem_engine::status::IstProgress;
use tandem_health::http::{Request, Response};
use tandem_health::metrics::{self, Histogram, Series, Value};
use tandem_health::policy::{self, Policy, Snapshot};
use tandem_health::server::{self, Listeners, Service};
use tandem_health::sst_progress::{Role, SstProgress};

/// Starts the listeners the options ask for; none when both addresses are
/// empty (the default).
pub fn start(node: &Node) -> Result<Option<Listeners>, String> {
    let http = node.option("health.address");
    let agent = node.option("health.agent_address");
    if http.trim().is_empty() && agent.trim().is_empty() {
        return Ok(None);
    }
    let service = Arc::new(NodeService { node: node.clone() });
    server::start(("health.address", &http), ("health.agent_address", &agent), service).map(Some)
}

struct NodeService {
    node: Node,
}

impl NodeService {
    fn snapshot(&self) -> Snapshot {
        let r = self.node.readiness();
        Snapshot {
            state: r.state.number(),
            state_comment: r.state.comment().into(),
            primary: r.primary,
            lag: r.lag,
            lag_ms: r.lag_ms,
        }
    }

    /// Read on every check, so `SET GLOBAL wsrep_provider_options` takes
    /// effect at the next one.
    fn policy(&self) -> Policy {
        let defaults = Policy::default();
        Policy {
            donor_available: parse_bool(&self.node.option("health.donor_available"))
                .unwrap_or(defaults.donor_available),
            lag_drain: self.node.option("health.lag_drain").parse().unwrap_or(defaults.lag_drain),
            lag_drain_seconds: self
                .node
                .option("health.lag_drain_seconds")
                .parse()
                .unwrap_or(defaults.lag_drain_seconds),
        }
    }

    /// The state transfer this node is receiving or sending, if any. Only
    /// a joining node looks for a joiner's file and only a donor for a
    /// donor's: a file left by a killed transfer (whose pid another process
    /// may have taken since) never shows on a node in service.
    fn sst_progress(&self, state: LocalState) -> Option<SstProgress> {
        let role = match state {
            LocalState::Joining | LocalState::ReceivingState => Role::Joiner,
            LocalState::Donor => Role::Donor,
            _ => return None,
        };
        SstProgress::read(self.node.data_dir()).filter(|p| p.role == role)
    }

    fn health(&self) -> Response {
        let snapshot = self.snapshot();
        match policy::availability(&snapshot, &self.policy()) {
            Ok(why) => Response::text(200, format!("Node is available: {why}.\r\n")),
            Err(why) => {
                let sst = self.sst_progress(self.node.readiness().state);
                let sst = sst.map(|p| format!(" ({}: {})", transfer_name(p.role), p.summary())).unwrap_or_default();
                Response::text(503, format!("Node is not available: {why}{sst}.\r\n"))
            }
        }
    }

    fn metrics(&self) -> Response {
        let status: Vec<(&str, Value)> = self
            .node
            .status()
            .into_iter()
            .map(|(name, value)| {
                let value = match value {
                    StatValue::Int(v) => Value::Int(v),
                    StatValue::Double(v) => Value::Double(v),
                    StatValue::Str(v) => Value::Text(v),
                };
                (name, value)
            })
            .collect();
        let snapshot = self.snapshot();
        let available = policy::availability(&snapshot, &self.policy()).is_ok();
        let mut extra = vec![
            Series::gauge(
                "tandem_available",
                "1 when the health check answers 200 (synced, or a donor with health.donor_available), else 0.",
                if available { 1.0 } else { 0.0 },
            ),
            Series::gauge(
                "tandem_primary",
                "1 when this node is in the primary component.",
                if snapshot.primary { 1.0 } else { 0.0 },
            ),
            Series::gauge(
                "tandem_apply_lag_write_sets",
                "Write-sets the group ordered that this node has not applied yet.",
                snapshot.lag as f64,
            ),
            Series::gauge(
                "tandem_apply_lag_seconds",
                "How long the oldest write-set delivered to this node has waited for its appliers.",
                snapshot.lag_ms as f64 / 1000.0,
            ),
        ];
        extra.extend(ist_progress(self.node.ist_progress()));
        extra.extend(sst_progress(self.sst_progress(self.node.readiness().state)));
        let [commit, apply] = self.node.latencies();
        let histograms = [
            histogram(
                "tandem_commit_latency_seconds",
                "Local commits, from the server's certify call (flow control and the group's round trip included) \
                 to the end of the commit.",
                commit,
            ),
            histogram(
                "tandem_apply_latency_seconds",
                "Write-sets applied here, from their delivery to this node to the end of their commit.",
                apply,
            ),
        ];
        Response {
            status: 200,
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body: metrics::render(&status, &extra, &histograms),
        }
    }
}

fn histogram(name: &str, help: &str, latency: LatencySnapshot) -> Histogram {
    Histogram {
        name: name.into(),
        help: help.into(),
        bounds: LATENCY_BOUNDS.to_vec(),
        counts: latency.counts,
        sum: latency.sum_seconds,
    }
}

/// The IST this process received, in numbers (`wsrep_ist_receive_status`
/// is the same in words); nothing when it joined otherwise.
fn ist_progress(ist: Option<IstProgress>) -> Vec<Series> {
    let Some(ist) = ist else { return vec![] };
    vec![
        Series::gauge("tandem_ist_first_seqno", "First seqno of the IST this process received.", ist.first as f64),
        Series::gauge("tandem_ist_last_seqno", "Last seqno of the IST this process received.", ist.last as f64),
        Series::gauge(
            "tandem_ist_remaining_write_sets",
            "Write-sets of the IST not applied yet.",
            (ist.total - ist.done) as f64,
        ),
        Series::gauge(
            "tandem_ist_progress_ratio",
            "Share of the IST applied, from 0 to 1.",
            ist.done as f64 / ist.total as f64,
        ),
    ]
}

/// For the health check's 503 text.
fn transfer_name(role: Role) -> &'static str {
    match role {
        Role::Joiner => "state transfer",
        Role::Donor => "donating a state transfer",
    }
}

/// The state transfer this node is receiving or sending, while it does
/// (the joining server answers no SQL until it is over). A joiner's bytes
/// and files are `received`, a donor's `sent`; the rest is common.
fn sst_progress(sst: Option<SstProgress>) -> Vec<Series> {
    let Some(sst) = sst else { return vec![] };
    let moved = sst.role.verb();
    let how = format!("{moved} so far");
    let mut series = vec![
        Series::gauge(
            &format!("tandem_sst_{moved}_bytes"),
            &format!("Bytes of the state transfer {how}."),
            sst.received_bytes as f64,
        ),
        Series::gauge(
            "tandem_sst_total_bytes",
            "Bytes the donor announced for the state transfer; 0 on a joiner until the first stream arrives.",
            sst.total_bytes as f64,
        ),
        Series::gauge(
            &format!("tandem_sst_{moved}_files"),
            &format!("Files of the state transfer {how}, whole."),
            sst.received_files as f64,
        ),
        Series::gauge("tandem_sst_total_files", "Files the donor announced.", sst.total_files as f64),
        Series::gauge(
            "tandem_sst_start_time_seconds",
            "When the joiner started waiting for its donor, or the donor started sending (Unix time).",
            sst.started_unix_ms as f64 / 1000.0,
        ),
    ];
    if let Some(ratio) = sst.ratio() {
        series.push(Series::gauge(
            "tandem_sst_progress_ratio",
            &format!("Share of the state transfer {how}, from 0 to 1."),
            ratio,
        ));
    }
    series
}

impl Service for NodeService {
    fn http(&self, request: &Request) -> Response {
        match request.path.as_str() {
            // Any method: HAProxy's httpchk sends OPTIONS by default.
            "/" | "/health" => self.health(),
            "/metrics" if matches!(request.method.as_str(), "GET" | "HEAD") => self.metrics(),
            "/metrics" => Response::text(405, "GET /metrics\r\n"),
            _ => Response::text(404, "Paths: / or /health (health check), /metrics (Prometheus)\r\n"),
        }
    }

    fn agent_line(&self) -> String {
        policy::agent(&self.snapshot(), &self.policy()).line()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(series: &[Series]) -> Vec<String> {
        series.iter().map(|s| s.name.clone()).collect()
    }

    /// Each side's series say which way the bytes went; the totals, start
    /// and ratio are common, so one dashboard shows both ends.
    #[test]
    fn a_donor_shows_what_it_sent_and_a_joiner_what_it_received() {
        let joiner = SstProgress {
            role: Role::Joiner,
            pid: 1,
            started_unix_ms: 1_000,
            received_bytes: 25,
            total_bytes: 100,
            received_files: 1,
            total_files: 4,
        };
        let donor = SstProgress { role: Role::Donor, ..joiner.clone() };
        let common = ["tandem_sst_total_bytes", "tandem_sst_total_files", "tandem_sst_start_time_seconds"];
        let j = names(&sst_progress(Some(joiner)));
        let d = names(&sst_progress(Some(donor)));
        for name in common.iter().chain(&["tandem_sst_progress_ratio"]) {
            assert!(j.iter().any(|n| n == name) && d.iter().any(|n| n == name), "{name}: {j:?} {d:?}");
        }
        assert!(j.contains(&"tandem_sst_received_bytes".into()) && !j.iter().any(|n| n.contains("sent")), "{j:?}");
        assert!(d.contains(&"tandem_sst_sent_bytes".into()) && !d.iter().any(|n| n.contains("received")), "{d:?}");
        assert!(sst_progress(None).is_empty());
    }
}
