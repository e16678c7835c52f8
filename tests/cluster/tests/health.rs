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
    // Every write-set node 2 applied is in its apply latency histogram, and
    // every local commit of node 1 in its commit latency histogram.
    let applied = sample(&page, "tandem_apply_latency_seconds_count").context("no apply latency")?;
    ensure!(applied == status_i64(c.node(2), "wsrep_received")? as f64 && applied >= 2.0, "{page}");
    let (_, origin) = http_get(c.node(1).health_addr().context("no health port")?, "/metrics")?;
    let commits = sample(&origin, "tandem_commit_latency_seconds_count").context("no commit latency")?;
    ensure!(commits == status_i64(c.node(1), "wsrep_local_commits")? as f64 && commits >= 1.0, "{origin}");
    ensure!(sample(&origin, "tandem_commit_latency_seconds_sum").is_some_and(|s| s > 0.0), "{origin}");
    scraped_by_prometheus(&c)?;

    // A desynced node is out (and drained, not downed, by the agent) until
    // the operator says donors count or it resyncs.
    set(c.node(2), "SET GLOBAL wsrep_desync = ON")?;
    wait_check(c.node(2), 503, "Donor/Desynced", "up drain #Donor/Desynced")?;
    scripts_and_proxysql_see(c.node(2), c.node(3))?;
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

/// `tandem node check` on a node, as keepalived runs it: exit status and
/// the line it printed.
fn node_check(node: &Node, options: &[&str]) -> Result<(i32, String)> {
    let bin = tandem::cluster::sst_script::tandem_binary().context("the tandem binary is built beside the tests")?;
    let socket = node.socket.to_str().context("socket path")?;
    let out = std::process::Command::new(bin).args(["node", "check", "--node", socket]).args(options).output()?;
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok((out.status.code().context("killed by a signal")?, said.trim().to_string()))
}

/// What ProxySQL 2.x's Galera monitor asks a MariaDB backend on every
/// check (its `mysql-monitor_galera_healthcheck_interval`), in its column
/// order. `pxc_maint_mode` is Percona's: for MariaDB it asks for the
/// constant 'DISABLED' instead of a variable.
const PROXYSQL_GALERA_CHECK: &str = "SELECT \
    (SELECT VARIABLE_VALUE FROM INFORMATION_SCHEMA.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE') wsrep_local_state, \
    @@read_only read_only, \
    (SELECT VARIABLE_VALUE FROM INFORMATION_SCHEMA.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_RECV_QUEUE') wsrep_local_recv_queue, \
    @@wsrep_desync wsrep_desync, @@wsrep_reject_queries wsrep_reject_queries, \
    @@wsrep_sst_donor_rejects_queries wsrep_sst_donor_rejects_queries, \
    (SELECT VARIABLE_VALUE FROM INFORMATION_SCHEMA.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_CLUSTER_STATUS') wsrep_cluster_status, \
    (SELECT 'DISABLED') pxc_maint_mode";

/// Where ProxySQL's Galera monitor puts a node given the row above
/// (docs/operations.md, "ProxySQL"): out of the primary component,
/// desynced, not Synced or rejecting queries, it goes offline; read_only,
/// a reader (offline when `max_transactions_behind` behind); else a writer
/// (`max_writers` then decides writer or backup writer).
fn proxysql_places(row: &[&str], max_transactions_behind: u64) -> Result<String> {
    // pxc_maint_mode: MariaDB has none; ProxySQL asks for a constant.
    let [state, read_only, recv_queue, desync, reject, _donor_rejects, cluster, _pxc_maint_mode] = row else {
        anyhow::bail!("{} columns, not 8: {row:?}", row.len());
    };
    let number = |v: &str| v.parse::<u64>().with_context(|| format!("{v:?} is not a number in {row:?}"));
    Ok(if *cluster != "Primary" {
        "offline (primary_partition=NO)".into()
    } else if number(desync)? != 0 {
        "offline (wsrep_desync=YES)".into()
    } else if number(state)? != 4 {
        format!("offline (wsrep_local_state={state})")
    } else if *reject != "NONE" {
        "offline (wsrep_reject_queries)".into()
    } else if number(read_only)? != 0 {
        if number(recv_queue)? > max_transactions_behind { "offline (lagging)" } else { "reader" }.into()
    } else {
        "writer".into()
    })
}

fn proxysql_sees(node: &Node) -> Result<String> {
    let row = sql(node, PROXYSQL_GALERA_CHECK).map_err(anyhow::Error::msg)?;
    eprintln!("{}: ProxySQL's Galera check reads {row:?}", node.name);
    proxysql_places(&row.split('\t').collect::<Vec<_>>(), 100)
}

/// `tandem node check` and ProxySQL's Galera monitor on a desynced node
/// and on a synced one, as the health check sees them.
fn scripts_and_proxysql_see(desynced: &Node, synced: &Node) -> Result<()> {
    scripts_and_proxysql_see_a_desynced_node(desynced)?;
    scripts_and_proxysql_see_a_synced_node(synced)
}

/// A desynced node: out for scripts unless donors count, and offline for
/// ProxySQL, which reads wsrep_desync itself.
fn scripts_and_proxysql_see_a_desynced_node(node: &Node) -> Result<()> {
    let (code, said) = node_check(node, &[])?;
    ensure!(code == 1 && said.ends_with("not available: Donor/Desynced"), "{code}: {said}");
    let (code, said) = node_check(node, &["--available-when-donor"])?;
    ensure!(code == 0 && said.contains("available: Donor/Desynced"), "{code}: {said}");
    ensure!(proxysql_sees(node)? == "offline (wsrep_desync=YES)");
    Ok(())
}

/// A synced node is in for scripts and a writer for ProxySQL; made
/// read_only, it is out for scripts that decide where writes go (in for
/// the others, as for /health) and a reader for ProxySQL.
fn scripts_and_proxysql_see_a_synced_node(node: &Node) -> Result<()> {
    let (code, said) = node_check(node, &[])?;
    ensure!(code == 0 && said.ends_with("available: synced"), "{code}: {said}");
    ensure!(proxysql_sees(node)? == "writer");
    set(node, "SET GLOBAL read_only = ON")?;
    let (code, said) = node_check(node, &["--unavailable-when-readonly"])?;
    let read_only = proxysql_sees(node);
    let (code_plain, said_plain) = node_check(node, &[])?;
    set(node, "SET GLOBAL read_only = OFF")?;
    ensure!(code == 1 && said.contains("read_only=ON"), "{code}: {said}");
    ensure!(code_plain == 0, "{code_plain}: {said_plain}");
    ensure!(read_only? == "reader");
    ensure!(proxysql_sees(node)? == "writer");
    Ok(())
}

/// Prometheus (Debian's package) in the foreground, stopped by its PID
/// when dropped.
struct Prometheus {
    child: std::process::Child,
    addr: std::net::SocketAddr,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_prometheus(dir: &std::path::Path, nodes: &[Node]) -> Result<Prometheus> {
    let port = tandem_cluster_tests::spare_ports(nodes, 1)?[0];
    let targets: Vec<String> =
        nodes.iter().map(|n| Ok(format!("'{}'", n.health_addr().context("no health port")?))).collect::<Result<_>>()?;
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
         scrape_configs:\n  - job_name: tandem\n    static_configs:\n      - targets: [{}]\n",
        targets.join(", ")
    );
    let cfg = dir.join("prometheus.yml");
    std::fs::write(&cfg, config)?;
    let log = std::fs::File::create(dir.join("prometheus.log"))?;
    let child = std::process::Command::new("prometheus")
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(log.try_clone()?)
        .stderr(log)
        .stdin(std::process::Stdio::null())
        .spawn()
        .context("start prometheus (make deps installs it)")?;
    Ok(Prometheus { child, addr: ([127, 0, 0, 1], port).into() })
}

/// An instant query's samples, by the `instance` label. An error (or a
/// Prometheus not up yet) is an empty answer.
fn query(prometheus: &Prometheus, expr: &str) -> Vec<(String, f64)> {
    let escaped: String = expr
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let Ok((200, body)) = http_get(prometheus.addr, &format!("/api/v1/query?query={escaped}")) else { return vec![] };
    let Ok(json) = serde_json::from_str::<serde_json::Value>(&body) else { return vec![] };
    let results = json["data"]["result"].as_array().cloned().unwrap_or_default();
    results
        .iter()
        .filter_map(|r| {
            let instance = r["metric"]["instance"].as_str()?.to_string();
            Some((instance, r["value"][1].as_str()?.parse().ok()?))
        })
        .collect()
}

/// A real Prometheus scrapes every node: it accepts the whole page (a page
/// it cannot parse makes `up` 0), reads the same figures as SHOW STATUS, and
/// reads the latency histograms as histograms.
fn scraped_by_prometheus(c: &TestCluster) -> Result<()> {
    let dir = tempfile::Builder::new().prefix("tandem-prometheus-").tempdir_in("/tmp")?;
    let prometheus = start_prometheus(dir.path(), c.nodes())?;
    let log = || tail(&std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default());
    let instance = |node: &Node| node.health_addr().map(|a| a.to_string()).unwrap_or_default();
    let took = wait_for("Prometheus scraping all three nodes", Duration::from_secs(60), || {
        let up = query(&prometheus, "up");
        Ok(up.len() == 3 && up.iter().all(|(_, v)| *v == 1.0))
    })
    .with_context(|| format!("scrape targets: {:?}\n{}", query(&prometheus, "up"), log()))?;
    eprintln!("prometheus: all three nodes scraped after {took:.1?}");
    for node in c.nodes() {
        let shown = status_i64(node, "wsrep_last_committed")? as f64;
        wait_for(&format!("Prometheus reading {}'s wsrep_last_committed", node.name), Duration::from_secs(30), || {
            Ok(query(&prometheus, "wsrep_last_committed").contains(&(instance(node), shown)))
        })
        .with_context(|| {
            format!("SHOW STATUS says {shown}; Prometheus {:?}", query(&prometheus, "wsrep_last_committed"))
        })?;
    }
    let commits = status_i64(c.node(1), "wsrep_local_commits")? as f64;
    let counted = query(&prometheus, "tandem_commit_latency_seconds_count");
    ensure!(counted.contains(&(instance(c.node(1)), commits)), "{commits} commits on node1; Prometheus: {counted:?}");
    let median = query(&prometheus, "histogram_quantile(0.5, tandem_commit_latency_seconds_bucket)");
    let of_node1 = median.iter().find(|(i, _)| *i == instance(c.node(1))).map(|(_, v)| *v);
    ensure!(of_node1.is_some_and(|m| m > 0.0 && m <= 10.0), "median commit latency of node1: {median:?}");
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
    let Err(why) = tandem::cluster::Cluster::up(s) else {
        anyhow::bail!("the node started with its health port taken")
    };
    let log = std::fs::read_to_string(dir.path().join("c/node1/error.log")).unwrap_or_default();
    let line = format!("health.address={address}: cannot listen");
    // Why it did not start, for the day the log is empty: it failed before
    // the server ran, not at its health port.
    ensure!(
        log.contains(&line) && log.contains("the port is taken"),
        "no '{line}' in the log (the start failed with: {why:#}):\n{}",
        tail(&log)
    );
    Ok(())
}
