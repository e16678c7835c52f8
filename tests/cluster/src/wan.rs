//! Probing paths of a multi-site layout (`tandem_wan::layout`): a UDP echo
//! in one node's namespace, the prober in another's, both the `tandem`
//! binary's `wan echo` and `wan probe`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use tandem_wan::layout::Layout;

/// The UDP port the echo answers on.
const ECHO_PORT: u16 = 7077;

/// The `tandem` binary the emulator and the probes run from.
pub fn tandem_binary() -> Result<PathBuf> {
    tandem::cluster::sst_script::tandem_binary()
        .ok_or_else(|| anyhow!("no tandem binary (build it, or set TANDEM_BIN)"))
}

/// The cluster's hosts on the layout: each node's address and namespace.
pub fn hosts(layout: &Layout) -> Vec<tandem::cluster::Host> {
    (1..=layout.nodes())
        .map(|i| tandem::cluster::Host {
            address: layout.address(i),
            netns: Some(layout.namespace(i)),
            segment: u8::try_from(layout.site(i)).ok(),
        })
        .collect()
}

/// A `tandem wan echo` in a node's namespace, stopped on drop.
pub struct Echo(Child);

impl Echo {
    pub fn start(layout: &Layout, node: usize) -> Result<Echo> {
        let listen = format!("{}:{ECHO_PORT}", layout.address(node));
        let child = Command::new("ip")
            .args(["netns", "exec", &layout.namespace(node)])
            .arg(tandem_binary()?)
            .args(["wan", "echo", "--listen", &listen])
            .stdin(Stdio::null())
            .spawn()
            .context("starting tandem wan echo")?;
        // Bound before the first probe: a probe sent earlier is answered
        // by nothing and counted lost.
        std::thread::sleep(Duration::from_millis(300));
        Ok(Echo(child))
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What `tandem wan probe` printed, by key (`loss_pct`, `rtt_p50_ms`, ...).
pub type Probed = BTreeMap<String, f64>;

/// Probes from node `from` to the echo on node `to`: `count` datagrams of
/// `size` bytes, one every `interval` (`0ms`: back to back).
pub fn probe(layout: &Layout, from: usize, to: usize, count: u64, interval: &str, size: usize) -> Result<Probed> {
    let target = format!("{}:{ECHO_PORT}", layout.address(to));
    let out = Command::new("ip")
        .args(["netns", "exec", &layout.namespace(from)])
        .arg(tandem_binary()?)
        .args(["wan", "probe", "--to", &target, "--count", &count.to_string(), "--interval", interval])
        .args(["--size", &size.to_string(), "--linger", "2s"])
        .output()
        .context("running tandem wan probe")?;
    if !out.status.success() {
        bail!("tandem wan probe: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    println!("node {from} -> node {to}: {line}");
    let mut probed = Probed::new();
    for pair in line.split_whitespace() {
        let (key, value) = pair.split_once('=').ok_or_else(|| anyhow!("{pair:?} in {line:?}"))?;
        // "-" (no answer at all) is left out.
        if let Ok(v) = value.parse() {
            probed.insert(key.to_string(), v);
        }
    }
    Ok(probed)
}

/// One value of a probe's line.
pub fn value(probed: &Probed, key: &str) -> Result<f64> {
    probed.get(key).copied().ok_or_else(|| anyhow!("no {key} in {probed:?}"))
}
