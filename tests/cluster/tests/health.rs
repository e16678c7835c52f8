//! The health check, HAProxy agent check and Prometheus metrics served by the
//! provider itself (`health.*`), on a real cluster.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use tandem::cluster::endpoints::{agent_says, http_get};
use tandem::cluster::state::Node;
use tandem_cluster_tests::*;

fn check(node: &Node) -> Result<(u16, String)> {
    http_get(node.health_addr().context("no health port")?, "/health")
}

fn agent(node: &Node) -> Result<String> {
    agent_says(node.agent_addr().context("no agent port")?)
}

fn wait_check(node: &Node, status: u16, body_has: &str, agent_is: &str) -> Result<()> {
    wait_for(&format!("{}: {status} '{body_has}', agent '{agent_is}'", node.name), Duration::from_secs(60), || {
        let (code, body) = check(node)?;
        Ok(code == status && body.contains(body_has) && agent(node)? == agent_is)
    })
    .map(|_| ())
}

/// `name value` samples of a Prometheus page, without labels.
fn sample(page: &str, name: &str) -> Option<f64> {
    page.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

fn set(node: &Node, statement: &str) -> Result<()> {
    sql(node, statement).map(|_| ()).map_err(anyhow::Error::msg)
}

#[test]
fn health_agent_and_metrics_follow_the_node() -> Result<()> {
    let mut c = up(3)?;
    for i in 1..=3 {
        wait_check(c.node(i), 200, "Node is available: synced.", "up ready 100%")?;
    }

    // Metrics: the same figures as SHOW STATUS, once the cluster is quiet.
    set(c.node(1), "CREATE DATABASE h; CREATE TABLE h.t (id INT PRIMARY KEY); INSERT INTO h.t VALUES (1), (2)")?;
    checksums(c.node(2), &["h.t"])?;
    let metrics_addr = c.node(2).health_addr().context("no health port")?;
    let (code, page) = http_get(metrics_addr, "/metrics")?;
    ensure!(code == 200, "/metrics answered {code}: {page}");
    for (series, status_name) in [
        ("wsrep_last_committed", "wsrep_last_committed"),
        ("wsrep_received_total", "wsrep_received"),
        ("wsrep_local_state", "wsrep_local_state"),
    ] {
        let scraped = sample(&page, series).with_context(|| format!("{series} missing from\n{page}"))?;
        let shown = status_i64(c.node(2), status_name)? as f64;
        ensure!(scraped == shown, "{series} {scraped} but SHOW STATUS {status_name} {shown}");
    }
    ensure!(sample(&page, "tandem_available") == Some(1.0), "{page}");
    ensure!(page.contains("wsrep_local_state_comment_info{value=\"Synced\"} 1"), "{page}");

    // A desynced node is out (and drained, not downed, by the agent) until
    // the operator says donors count or it resyncs.
    set(c.node(2), "SET GLOBAL wsrep_desync = ON")?;
    wait_check(c.node(2), 503, "Donor/Desynced", "up drain #Donor/Desynced")?;
    let (_, page) = http_get(metrics_addr, "/metrics")?;
    ensure!(sample(&page, "tandem_available") == Some(0.0), "{page}");
    set(c.node(2), "SET GLOBAL wsrep_provider_options = 'health.donor_available=YES'")?;
    wait_check(c.node(2), 200, "health.donor_available=YES", "up ready 100%")?;
    set(c.node(2), "SET GLOBAL wsrep_provider_options = 'health.donor_available=NO'")?;
    set(c.node(2), "SET GLOBAL wsrep_desync = OFF")?;
    wait_check(c.node(2), 200, "synced", "up ready 100%")?;
    wait_check(c.node(1), 200, "synced", "up ready 100%")?;

    // Garbage on the port: refused, and the next check is answered.
    let mut garbage = std::net::TcpStream::connect(metrics_addr)?;
    std::io::Write::write_all(&mut garbage, b"\x16\x03\x01\x00\xff garbage\r\n\r\n")?;
    let mut reply = String::new();
    std::io::Read::read_to_string(&mut garbage, &mut reply)?;
    ensure!(reply.starts_with("HTTP/1.1 400 "), "{reply}");
    ensure!(check(c.node(2))?.0 == 200);

    // The listeners are set at startup; a runtime change is refused.
    let refused = sql(c.node(1), "SET GLOBAL wsrep_provider_options = 'health.address=127.0.0.1:1'");
    ensure!(refused.is_err(), "health.address changed at runtime: {refused:?}");

    // A killed node's endpoints are gone; the others stay available.
    c.kill(3)?;
    ensure!(check(c.node(3)).is_err(), "a killed node answered its health check");
    wait_for("a 2-node primary component", Duration::from_secs(60), || {
        Ok(status(c.node(1), "wsrep_cluster_size")? == "2")
    })?;
    for i in 1..=2 {
        wait_check(c.node(i), 200, "synced", "up ready 100%")?;
    }
    Ok(())
}

#[test]
fn a_taken_health_port_stops_the_node_with_a_clear_error() -> Result<()> {
    let taken = std::net::TcpListener::bind("127.0.0.1:0")?;
    let address = taken.local_addr()?.to_string();
    let dir = tempfile::Builder::new().prefix("tandem-").tempdir_in("/tmp")?;
    let mut s = spec(&dir, 1);
    s.sync_timeout = Duration::from_secs(60);
    s.provider_options.push(("health.address".into(), address.clone()));
    let outcome = tandem::cluster::Cluster::up(s);
    ensure!(outcome.is_err(), "the node started with its health port taken");
    let log = std::fs::read_to_string(dir.path().join("c/node1/error.log")).unwrap_or_default();
    let line = format!("health.address={address}: cannot listen");
    ensure!(log.contains(&line) && log.contains("the port is taken"), "no '{line}' in the log:\n{}", tail(&log));
    Ok(())
}
