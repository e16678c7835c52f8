//! A Tandem node's health check, agent check and metrics, as a proxy or
//! Prometheus sees them: plain HTTP GETs and an agent read over TCP.

use anyhow::{anyhow, bail, Context, Result};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::state::Node;

const TIMEOUT: Duration = Duration::from_secs(5);

impl Node {
    /// `health.address`: health check (`/`, `/health`) and `/metrics`.
    pub fn health_addr(&self) -> Option<SocketAddr> {
        self.health_port.map(|p| SocketAddr::from(([127, 0, 0, 1], p)))
    }

    /// `health.agent_address`: HAProxy's agent check.
    pub fn agent_addr(&self) -> Option<SocketAddr> {
        self.health_port.map(|p| SocketAddr::from(([127, 0, 0, 1], p + 1)))
    }

    /// Every port the node was given: its SST and IST (`base + 1`) ports
    /// listen only during a transfer, so a free one may still be taken.
    pub fn reserved_ports(&self) -> Vec<u16> {
        let health = self.health_port.map(|p| [p, p + 1]).into_iter().flatten();
        [self.sql_port, self.base_port, self.base_port + 1, self.sst_port].into_iter().chain(health).collect()
    }
}

/// `GET path` over HTTP/1.1: the status code and the body.
pub fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT).with_context(|| format!("connect to {addr}"))?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).with_context(|| format!("read the answer of {addr}{path}"))?;
    let (head, body) =
        reply.split_once("\r\n\r\n").ok_or_else(|| anyhow!("{addr}{path}: no HTTP head in {reply:?}"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| anyhow!("{addr}{path}: no status in {head:?}"))?;
    Ok((status, body.to_string()))
}

/// What the agent check answers (one line, without its newline).
pub fn agent_says(addr: SocketAddr) -> Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT).with_context(|| format!("connect to {addr}"))?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).with_context(|| format!("read the agent at {addr}"))?;
    match reply.strip_suffix('\n') {
        Some(line) if !line.contains('\n') => Ok(line.to_string()),
        _ => bail!("agent at {addr}: not one line: {reply:?}"),
    }
}

/// Per node: the endpoints and what each answers now. None when no node
/// has them (a Galera cluster, or one made before they existed).
pub fn table_rows(nodes: &[Node]) -> Option<Vec<Vec<String>>> {
    if nodes.iter().all(|n| n.health_port.is_none()) {
        return None;
    }
    let rows = nodes
        .iter()
        .map(|node| {
            let (Some(health), Some(agent)) = (node.health_addr(), node.agent_addr()) else {
                return vec![node.name.clone(), "-".into(), "-".into(), "-".into(), "-".into()];
            };
            let check = match http_get(health, "/health") {
                Ok((status, body)) => format!("{status} {}", body.trim()),
                Err(e) => format!("({e:#})"),
            };
            let says = agent_says(agent).unwrap_or_else(|e| format!("({e:#})"));
            vec![
                node.name.clone(),
                format!("http://{health}/health  http://{health}/metrics"),
                check,
                agent.to_string(),
                says,
            ]
        })
        .collect();
    Some(rows)
}

pub const TABLE_HEADER: [&str; 5] = ["NODE", "HEALTH AND METRICS", "CHECK", "AGENT", "AGENT SAYS"];
