//! Sites on one machine: each node in a network namespace of its own, the
//! nodes of a site on one bridge, and a router namespace joining the sites,
//! where the emulator runs.
//!
//! ```text
//!   node 1 ─┐                       ┌─ node 3
//!   node 2 ─┴─ br1 ─ router ─ br2 ──┘
//!                      │
//!                    wan0 (TUN: tandem wan emulate)
//! ```
//!
//! Site `s` is the subnet 10.78.s.0/24; node `i` (numbered across all
//! sites) is 10.78.s.i, and the router is 10.78.s.254 on each bridge, every
//! node's default route. Within a site, packets cross the bridge only.
//! Between sites the router would forward them directly; a policy rule
//! (what arrives from a site's bridge is routed by table 100, whose one
//! route is the TUN device) sends them through the emulator instead, and
//! what the emulator writes back arrives from the device and is routed on
//! by the main table. Both providers run on the same layout unchanged.
//!
//! Everything is removed on drop, and what a killed run left behind is
//! removed by the next one (the names carry the owner's PID).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};

use crate::netns::{delete, ip_in, number_then, run, sysctl};

/// Every namespace a layout makes starts with this, then the owner's PID.
const PREFIX: &str = "tdw";
/// The routing table that leads into the emulator.
const WAN_TABLE: &str = "100";
/// The emulator's TUN device.
const DEVICE: &str = "wan0";

/// The namespaces, bridges and routes of a multi-site layout, and the
/// emulator process once started.
pub struct Layout {
    tag: String,
    /// The site (1-based) of each node, in node order.
    site_of: Vec<usize>,
    sites: usize,
    emulator: Option<Child>,
}

impl Layout {
    /// `sizes[s]` nodes in site `s + 1`: `[2, 1]` is the 2+1 layout.
    /// Fails with the command's own words when the machine does not allow it.
    pub fn new(sizes: &[usize]) -> Result<Layout> {
        ensure!(sizes.len() >= 2 && sizes.iter().all(|&n| n >= 1), "two sites or more, each with a node or more");
        ensure!(sizes.iter().sum::<usize>() < 254 && sizes.len() < 255, "too many nodes or sites");
        crate::netns::remove_stale(owner_pid);
        let site_of: Vec<usize> = sizes.iter().enumerate().flat_map(|(s, &n)| std::iter::repeat_n(s + 1, n)).collect();
        // Nothing made yet: a failure half way drops (removes) what was made.
        static MADE: AtomicUsize = AtomicUsize::new(0);
        let tag = format!("{PREFIX}{}l{}", std::process::id(), MADE.fetch_add(1, Ordering::Relaxed));
        let mut layout = Layout { tag, site_of: Vec::new(), sites: 0, emulator: None };
        layout.make_router(sizes.len())?;
        for (i, &site) in std::iter::zip(1.., &site_of) {
            layout.site_of.push(site);
            layout.add_node(i, site)?;
        }
        Ok(layout)
    }

    pub fn nodes(&self) -> usize {
        self.site_of.len()
    }

    /// The site (1-based) node `i` (1-based) is in.
    pub fn site(&self, i: usize) -> usize {
        self.site_of[i - 1]
    }

    /// Bytes routed from one site to another so far: what the kernel sent
    /// into the emulator's device (lost packets included, each packet once).
    pub fn wan_bytes(&self) -> Result<u64> {
        let counter = format!("/sys/class/net/{DEVICE}/statistics/tx_bytes");
        let text = run("ip", &["netns", "exec", &self.router(), "cat", &counter])?;
        text.trim().parse().with_context(|| format!("reading {counter} in {}: {text:?}", self.router()))
    }

    /// Node `i`'s address.
    pub fn address(&self, i: usize) -> String {
        format!("10.78.{}.{i}", self.site(i))
    }

    /// The namespace node `i` runs in.
    pub fn namespace(&self, i: usize) -> String {
        format!("{}n{i}", self.tag)
    }

    /// The router's namespace, where the emulator runs.
    pub fn router(&self) -> String {
        format!("{}r", self.tag)
    }

    /// `--site` arguments naming the sites `s1`, `s2`, ...
    pub fn site_args(&self) -> Vec<String> {
        (1..=self.sites).map(|s| format!("s{s}=10.78.{s}.0/24")).collect()
    }

    /// Starts the emulator (`tandem wan emulate`, from `tandem`) with these
    /// `--link` settings (such as `s1-s2:rtt=50ms`), replacing one already
    /// running, and returns once packets between sites go through it. Its
    /// log goes to `log`.
    pub fn emulate(&mut self, tandem: &Path, links: &[String], seed: u64, log: &Path) -> Result<()> {
        self.stop_emulator();
        let mut args: Vec<String> = vec!["netns".into(), "exec".into(), self.router(), tandem.display().to_string()];
        args.extend(["wan", "emulate", "--device", DEVICE, "--seed"].map(String::from));
        args.push(seed.to_string());
        args.extend(self.site_args().into_iter().flat_map(|s| ["--site".to_string(), s]));
        args.extend(links.iter().flat_map(|l| ["--link".to_string(), l.clone()]));
        let out = std::fs::OpenOptions::new().create(true).append(true).open(log)?;
        let child = Command::new("ip").args(&args).stdout(out.try_clone()?).stderr(out).stdin(Stdio::null()).spawn();
        self.emulator = Some(child.context("starting tandem wan emulate")?);
        let started = Instant::now();
        while run("ip", &["-n", &self.router(), "link", "show", DEVICE, "up"]).map_or(true, |out| out.is_empty()) {
            if let Some(Ok(Some(status))) = self.emulator.as_mut().map(Child::try_wait) {
                bail!("the WAN emulator stopped ({status}): see {}", log.display());
            }
            ensure!(started.elapsed() < Duration::from_secs(10), "no {DEVICE} after 10 s: see {}", log.display());
            std::thread::sleep(Duration::from_millis(20));
        }
        // Replaced with the device: a stopped emulator's route went with it.
        ip_in(&self.router(), &["route", "replace", "default", "dev", DEVICE, "table", WAN_TABLE])?;
        // What the device gives back comes from a site's addresses on
        // another interface than that site's: no reverse-path check.
        sysctl(&self.router(), &format!("net.ipv4.conf.{DEVICE}.rp_filter=0"))
    }

    fn stop_emulator(&mut self) {
        if let Some(mut child) = self.emulator.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn make_router(&mut self, sites: usize) -> Result<()> {
        let router = self.router();
        run("ip", &["netns", "add", &router])?;
        ip_in(&router, &["link", "set", "lo", "up"])?;
        sysctl(&router, "net.ipv4.ip_forward=1")?;
        sysctl(&router, "net.ipv4.conf.all.rp_filter=0")?;
        sysctl(&router, "net.ipv4.conf.default.rp_filter=0")?;
        for s in 1..=sites {
            self.sites = s;
            let bridge = format!("br{s}");
            ip_in(&router, &["link", "add", &bridge, "type", "bridge"])?;
            ip_in(&router, &["addr", "add", &format!("10.78.{s}.254/24"), "dev", &bridge])?;
            ip_in(&router, &["link", "set", &bridge, "up"])?;
            ip_in(&router, &["rule", "add", "iif", &bridge, "table", WAN_TABLE, "pref", "100"])?;
        }
        Ok(())
    }

    fn add_node(&self, i: usize, site: usize) -> Result<()> {
        let ns = self.namespace(i);
        run("ip", &["netns", "add", &ns])?;
        ip_in(&ns, &["link", "set", "lo", "up"])?;
        let port = format!("p{i}");
        ip_in(&self.router(), &["link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &ns])?;
        ip_in(&self.router(), &["link", "set", &port, "master", &format!("br{site}"), "up"])?;
        ip_in(&ns, &["addr", "add", &format!("{}/24", self.address(i)), "dev", "eth0"])?;
        ip_in(&ns, &["link", "set", "eth0", "up"])?;
        ip_in(&ns, &["route", "add", "default", "via", &format!("10.78.{site}.254")])?;
        Ok(())
    }
}

impl Drop for Layout {
    fn drop(&mut self) {
        self.stop_emulator();
        // Deleting a namespace deletes its end of each veth pair, and so the pair.
        for i in 1..=self.site_of.len() {
            let _ = delete(&self.namespace(i));
        }
        let _ = delete(&self.router());
    }
}

/// The PID in a name a layout made (`tdw<pid>l<k>r`, `tdw<pid>l<k>n<i>`:
/// the `k`th layout of process `pid`, its router or its node `i`).
fn owner_pid(name: &str) -> Option<u32> {
    let (pid, rest) = number_then(name.strip_prefix(PREFIX)?)?;
    let (_, rest) = number_then(rest.strip_prefix('l')?)?;
    let ours = rest == "r" || rest.strip_prefix('n').and_then(number_then).is_some_and(|(_, end)| end.is_empty());
    ours.then_some(pid).and_then(|p| u32::try_from(p).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_names_carry_an_owner() {
        assert_eq!(owner_pid("tdw123l0r"), Some(123));
        assert_eq!(owner_pid("tdw123l7n4"), Some(123));
        assert_eq!(owner_pid("tdw123l0n"), None);
        assert_eq!(owner_pid("tdw123l0n4x"), None);
        assert_eq!(owner_pid("tdw123r"), None);
        assert_eq!(owner_pid("tdw123l0sw"), None);
        assert_eq!(owner_pid("tdm123l0n4"), None);
        assert_eq!(owner_pid("tdwl0r"), None);
    }
}
