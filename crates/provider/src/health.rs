//! The node's health check, HAProxy agent check and Prometheus metrics
//! (`health.*` options), answered from the engine's state by the listeners
//! of `tandem-health`.

use std::sync::Arc;

use tandem_engine::node::Node;
use tandem_engine::options::parse_bool;
use tandem_engine::stats::StatValue;
use tandem_health::http::{Request, Response};
use tandem_health::metrics::{self, Series, Value};
use tandem_health::policy::{self, Policy, Snapshot};
use tandem_health::server::{self, Listeners, Service};

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
        Snapshot { state: r.state.number(), state_comment: r.state.comment().into(), primary: r.primary, lag: r.lag }
    }

    /// Read on every check, so `SET GLOBAL wsrep_provider_options` takes
    /// effect at the next one.
    fn policy(&self) -> Policy {
        let defaults = Policy::default();
        Policy {
            donor_available: parse_bool(&self.node.option("health.donor_available"))
                .unwrap_or(defaults.donor_available),
            lag_drain: self.node.option("health.lag_drain").parse().unwrap_or(defaults.lag_drain),
        }
    }

    fn health(&self) -> Response {
        match policy::availability(&self.snapshot(), &self.policy()) {
            Ok(why) => Response::text(200, format!("Node is available: {why}.\r\n")),
            Err(why) => Response::text(503, format!("Node is not available: {why}.\r\n")),
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
        let extra = [
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
        ];
        Response {
            status: 200,
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body: metrics::render(&status, &extra),
        }
    }
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
