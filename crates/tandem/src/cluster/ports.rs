//! Free port allocation for local clusters.
//!
//! Every node needs an SQL port, a group port (`base_port`) whose successor is
//! the IST port (Galera's default `ist.recv_addr` is `base_port + 1`), and an
//! SST port; a Tandem node also serves its health check and metrics on one
//! port and HAProxy's agent check on the next. All of them must be distinct
//! within a cluster and free right now.

use anyhow::{bail, Result};
use std::collections::hash_map::RandomState;
use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;

/// Ports are drawn below Linux's default ephemeral range (32768–60999) so that
/// outgoing connections cannot grab a port between our check and mariadbd's bind.
pub const PORT_MIN: u16 = 20000;
pub const PORT_MAX: u16 = 32000;

/// How many random draws we allow before giving up (a busy box, not a bug).
const MAX_ATTEMPTS: usize = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodePorts {
    pub sql: u16,
    /// Group communication port; `base + 1` is reserved for IST.
    pub base: u16,
    pub sst: u16,
    /// `health.address`; `health + 1` is `health.agent_address`.
    pub health: u16,
}

/// Allocates ports for `nodes` nodes, checking each one by binding it.
pub fn allocate(nodes: usize) -> Result<Vec<NodePorts>> {
    allocate_with(nodes, random_port, is_free)
}

/// Allocation with injectable randomness and liveness check (for tests).
pub fn allocate_with(
    nodes: usize,
    mut draw: impl FnMut() -> u16,
    is_free: impl Fn(u16) -> bool,
) -> Result<Vec<NodePorts>> {
    let mut taken = HashSet::new();
    let mut pick = |span: u16| -> Result<u16> {
        for _ in 0..MAX_ATTEMPTS {
            let port = draw();
            let all = (0..span).map(|k| port.checked_add(k));
            let ports: Option<Vec<u16>> = all.collect();
            let Some(ports) = ports else { continue };
            if ports.iter().all(|p| !taken.contains(p) && is_free(*p)) {
                taken.extend(ports);
                return Ok(port);
            }
        }
        bail!("could not find free TCP ports in {PORT_MIN}..{PORT_MAX} on 127.0.0.1")
    };
    let mut out = Vec::with_capacity(nodes);
    for _ in 0..nodes {
        let sql = pick(1)?;
        let base = pick(2)?;
        let sst = pick(1)?;
        let health = pick(2)?;
        out.push(NodePorts { sql, base, sst, health });
    }
    Ok(out)
}

/// `count` distinct ports for helpers beside a cluster: free now, and none of
/// `reserved` (its nodes' `reserved_ports`, free only while no transfer runs).
pub fn spare(count: usize, reserved: &[u16]) -> Result<Vec<u16>> {
    spare_with(count, reserved, random_port, is_free)
}

fn spare_with(
    count: usize,
    reserved: &[u16],
    mut draw: impl FnMut() -> u16,
    is_free: impl Fn(u16) -> bool,
) -> Result<Vec<u16>> {
    let mut out: Vec<u16> = Vec::with_capacity(count);
    for _ in 0..count {
        let port = std::iter::repeat_with(&mut draw)
            .take(MAX_ATTEMPTS)
            .find(|p| !reserved.contains(p) && !out.contains(p) && is_free(*p));
        let Some(port) = port else { bail!("could not find a spare TCP port in {PORT_MIN}..{PORT_MAX} on 127.0.0.1") };
        out.push(port);
    }
    Ok(out)
}

/// A port in [PORT_MIN, PORT_MAX); std's randomly keyed hasher avoids a rand dependency.
pub fn random_port() -> u16 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    let span = u64::from(PORT_MAX - PORT_MIN);
    PORT_MIN + (hasher.finish() % span) as u16
}

/// True when nobody listens on 127.0.0.1:port (and on the wildcard address).
pub fn is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok() && TcpListener::bind(("0.0.0.0", port)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flatten(ports: &[NodePorts]) -> Vec<u16> {
        ports.iter().flat_map(|p| [p.sql, p.base, p.base + 1, p.sst, p.health, p.health + 1]).collect()
    }

    #[test]
    fn real_allocation_is_unique_and_in_range() {
        let ports = allocate(5).unwrap();
        let all = flatten(&ports);
        let unique: HashSet<_> = all.iter().collect();
        assert_eq!(unique.len(), all.len(), "duplicate port in {all:?}");
        assert!(all.iter().all(|p| (PORT_MIN..=PORT_MAX).contains(p)));
    }

    #[test]
    fn collisions_are_redrawn() {
        // A draw sequence full of repeats must still yield distinct ports.
        let seq = [21000, 21000, 21001, 21000, 21005, 21005, 21010, 21020, 21030, 21040, 21050, 21060];
        let mut it = seq.iter().copied().cycle();
        let ports = allocate_with(2, || it.next().unwrap(), |_| true).unwrap();
        let all = flatten(&ports);
        let unique: HashSet<_> = all.iter().collect();
        assert_eq!(unique.len(), all.len(), "duplicate port in {all:?}");
    }

    #[test]
    fn busy_ports_are_skipped() {
        let busy = [22001, 22002, 22005];
        let mut next = 22000u16;
        let draw = || {
            next += 1;
            next
        };
        let ports = allocate_with(1, draw, |p| !busy.contains(&p)).unwrap();
        // sql skips 22001/22002; base 22004 is refused because 22005 (IST) is busy.
        assert_eq!(ports[0], NodePorts { sql: 22003, base: 22006, sst: 22008, health: 22009 });
    }

    #[test]
    fn exhausted_range_is_an_error() {
        assert!(allocate_with(1, || 25000, |_| false).is_err());
    }

    #[test]
    fn spare_ports_avoid_the_reserved_ones_and_each_other() {
        // 23001 is a node's SST port: free now, but reserved.
        let mut it = [23001, 23002, 23002, 23001, 23003].into_iter();
        let ports = spare_with(2, &[23001], || it.next().unwrap_or(23001), |_| true).unwrap();
        assert_eq!(ports, vec![23002, 23003]);
        assert!(spare_with(1, &[23001], || 23001, |_| true).is_err(), "only a reserved port to draw");
        assert!(spare_with(1, &[], || 23004, |_| false).is_err(), "nothing free");
    }
}
