//! A small network of our own for partition tests: each node in its own
//! network namespace, joined to a bridge in a "switch" namespace by a veth
//! pair, so the group traffic between nodes crosses links the test can cut.
//! Nothing touches the caller's namespace: the test talks SQL to the nodes
//! over their unix sockets, which namespaces do not separate.
//!
//! Faults are nftables rules in a node's own namespace (what it drops on the
//! way in), links set down in the switch, and `tc netem` delay where the
//! kernel has it. Everything is removed on drop, and namespaces a killed
//! run left behind are removed by the next one.

use std::process::Command;

use anyhow::{bail, Context, Result};
use tandem_wan::netns::{delete, ip_in, nft_in, number_then, run};

/// Every namespace we make starts with this, then our PID.
const PREFIX: &str = "tdm";
/// The nodes' subnet, private to the switch namespace's bridge.
const SUBNET: &str = "10.77.0";

pub struct Net {
    tag: String,
    nodes: usize,
}

impl Net {
    /// A switch and `nodes` node namespaces, links up, no rule yet. Fails
    /// with the command's own words when the machine does not allow it
    /// (no privilege, no `ip` or `nft`, a kernel without nftables).
    pub fn new(nodes: usize) -> Result<Net> {
        tandem_wan::netns::remove_stale(owner_pid);
        // Counts the nodes made so far: a failure half way drops what was made.
        let mut net = Net { tag: format!("{PREFIX}{}", std::process::id()), nodes: 0 };
        run("ip", &["netns", "add", &net.switch()])?;
        ip_in(&net.switch(), &["link", "set", "lo", "up"])?;
        ip_in(&net.switch(), &["link", "add", "br0", "type", "bridge"])?;
        ip_in(&net.switch(), &["link", "set", "br0", "up"])?;
        for i in 1..=nodes {
            net.nodes = i;
            net.add_node(i)?;
        }
        Ok(net)
    }

    /// The namespace node `i` runs in.
    pub fn namespace(&self, i: usize) -> String {
        format!("{}n{i}", self.tag)
    }

    /// Node `i`'s address.
    pub fn address(i: usize) -> String {
        format!("{SUBNET}.{i}")
    }

    /// The hosts to give `ClusterSpec::hosts`, in node order.
    pub fn hosts(&self) -> Vec<tandem::cluster::Host> {
        (1..=self.nodes)
            .map(|i| tandem::cluster::Host { address: Net::address(i), netns: Some(self.namespace(i)), segment: None })
            .collect()
    }

    /// Node `to` no longer receives anything node `from` sends (TCP
    /// included: a connection's acknowledgements from `from` are lost too).
    pub fn block(&self, from: usize, to: usize) -> Result<()> {
        self.rule(to, &format!("ip saddr {} drop", Net::address(from)))
    }

    /// No traffic either way between the two sides.
    pub fn split(&self, a: &[usize], b: &[usize]) -> Result<()> {
        for &x in a {
            for &y in b {
                self.block(x, y)?;
                self.block(y, x)?;
            }
        }
        Ok(())
    }

    /// Node `i` loses `percent` of what it receives, at random.
    pub fn loss(&self, i: usize, percent: u32) -> Result<()> {
        self.rule(i, &format!("numgen random mod 100 < {percent} drop"))
    }

    /// Node `i`'s cable in or out (its veth end in the switch).
    pub fn link(&self, i: usize, up: bool) -> Result<()> {
        ip_in(&self.switch(), &["link", "set", &format!("p{i}"), if up { "up" } else { "down" }])
    }

    /// Adds `ms` of delay on every node's link with `tc netem`. Ok(false)
    /// when the kernel has no netem (it is a module many kernels lack).
    pub fn delay(&self, ms: u32) -> Result<bool> {
        for i in 1..=self.nodes {
            let delay = format!("{ms}ms");
            let args = [
                "netns",
                "exec",
                &self.namespace(i),
                "tc",
                "qdisc",
                "replace",
                "dev",
                "eth0",
                "root",
                "netem",
                "delay",
                &delay,
            ];
            let out = Command::new("ip").args(args).output().context("running tc")?;
            if !out.status.success() {
                let text = String::from_utf8_lossy(&out.stderr);
                if text.contains("Specified qdisc kind is unknown") || text.contains("not supported") {
                    return Ok(false);
                }
                bail!("tc netem on node {i}: {}", text.trim());
            }
        }
        Ok(true)
    }

    /// Every rule gone and every link up: the network as `new` made it
    /// (a delay stays).
    pub fn heal(&self) -> Result<()> {
        for i in 1..=self.nodes {
            nft_in(&self.namespace(i), "flush chain inet tandem input")?;
            self.link(i, true)?;
        }
        Ok(())
    }

    fn switch(&self) -> String {
        format!("{}sw", self.tag)
    }

    fn add_node(&self, i: usize) -> Result<()> {
        let ns = self.namespace(i);
        run("ip", &["netns", "add", &ns])?;
        ip_in(&ns, &["link", "set", "lo", "up"])?;
        let port = format!("p{i}");
        ip_in(&self.switch(), &["link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &ns])?;
        ip_in(&self.switch(), &["link", "set", &port, "master", "br0", "up"])?;
        ip_in(&ns, &["addr", "add", &format!("{}/24", Net::address(i)), "dev", "eth0"])?;
        ip_in(&ns, &["link", "set", "eth0", "up"])?;
        nft_in(&ns, "add table inet tandem")?;
        nft_in(&ns, "add chain inet tandem input { type filter hook input priority 0; policy accept; }")
    }

    fn rule(&self, i: usize, rule: &str) -> Result<()> {
        nft_in(&self.namespace(i), &format!("add rule inet tandem input {rule}"))
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of each veth pair, and so the pair.
        for i in 1..=self.nodes {
            let _ = delete(&self.namespace(i));
        }
        let _ = delete(&self.switch());
    }
}

/// The PID in a name we made (`tdm<pid>sw`, `tdm<pid>n<i>`).
fn owner_pid(name: &str) -> Option<u32> {
    let (pid, rest) = number_then(name.strip_prefix(PREFIX)?)?;
    let ours = rest == "sw" || rest.strip_prefix('n').and_then(number_then).is_some_and(|(_, end)| end.is_empty());
    ours.then_some(pid).and_then(|p| u32::try_from(p).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_names_carry_an_owner() {
        assert_eq!(owner_pid("tdm123sw"), Some(123));
        assert_eq!(owner_pid("tdm123n4"), Some(123));
        assert_eq!(owner_pid("tdm123n"), None);
        assert_eq!(owner_pid("tdm123x"), None);
        assert_eq!(owner_pid("other"), None);
        assert_eq!(owner_pid("tdmsw"), None);
    }
}
