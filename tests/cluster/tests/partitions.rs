//! Partitions on a real network: every node in its own network namespace,
//! joined by veth pairs to a bridge, the links cut by the test (see
//! `tandem_cluster_tests::netns`). Bank transfers run on every node through
//! each fault; the minority must refuse, the majority must serve, and at the
//! end every acknowledged transfer is on every node, the money adds up and
//! no node differs (`bank::Ledger::verify`).
//!
//! These need root and a kernel with network namespaces and nftables, so
//! they are `#[ignore]`d in `make test-cluster` and run by
//! `make test-partitions`, which CI runs where the machine allows it (and
//! says so when it does not).

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use tandem_cluster_tests::bank::{self, Bank, Ledger};
use tandem_cluster_tests::netns::Net;
use tandem_cluster_tests::rounds;
use tandem_cluster_tests::*;

/// Long enough for a loaded 2-core machine to notice, elect and catch up.
const SETTLE: Duration = Duration::from_secs(120);

/// A cluster on its own network. The cluster is dropped (its processes
/// stopped) before the network it runs on.
struct Partitioned {
    c: TestCluster,
    net: Net,
    /// Every round's outcomes so far.
    ledger: Ledger,
    round: u64,
}

fn partitioned(nodes: usize) -> Result<Partitioned> {
    let net = Net::new(nodes).context("making the network namespaces")?;
    let hosts = net.hosts();
    let c = up_with(nodes, |s| s.hosts = hosts)?;
    bank::open(c.node(1))?;
    for i in 2..=nodes {
        wait_for("the bank on every node", SETTLE, || {
            Ok(sql(c.node(i), "SELECT COUNT(*) FROM bank.account").map_err(anyhow::Error::msg)? == "20")
        })?;
    }
    // netem is a kernel module many kernels lack: the faults below need only
    // nftables and links, a delay is added where it can be.
    match net.delay(3)? {
        true => eprintln!("partitions: 3 ms of delay on every link (tc netem)"),
        false => eprintln!("partitions: this kernel has no netem; links run without added delay"),
    }
    Ok(Partitioned { c, net, ledger: Ledger::default(), round: 0 })
}

impl Partitioned {
    fn all(&self) -> Vec<usize> {
        (1..=self.c.len()).collect()
    }

    /// Transfers on every node; returns once each has had some acknowledged,
    /// so every round starts from a serving cluster.
    fn open_bank(&mut self) -> Result<Bank> {
        self.round += 1;
        let bank = Bank::start(&self.c, &self.all(), self.round);
        for i in self.all() {
            bank.wait_acks(i, 3, SETTLE)?;
        }
        Ok(bank)
    }

    /// The majority's tellers get transfers acknowledged while cut off from the rest.
    fn serves(&self, bank: &Bank, majority: &[usize]) -> Result<()> {
        for &i in majority {
            bank.wait_acks(i, 10, SETTLE)?;
            ensure!(status(self.c.node(i), "wsrep_cluster_status")? == "Primary", "node {i} is not primary");
        }
        Ok(())
    }

    /// The network whole again: every node back in one primary component,
    /// synced, and serving.
    fn heal(&mut self, bank: &Bank) -> Result<()> {
        self.net.heal()?;
        rounds::whole_again(&mut self.c.cluster, bank, SETTLE)
    }

    /// Stops the round's tellers and checks every node against all rounds.
    fn close(&mut self, name: &str, bank: Bank) -> Result<()> {
        let (acked, doubtful) = rounds::close(&mut self.ledger, &self.c, name, bank)?;
        let committed = self.ledger.doubtful_committed(self.c.node(1))?;
        eprintln!(
            "partitions: {name}: {acked} transfers acknowledged, {doubtful} in doubt; all rounds: {} acknowledged, \
             {committed} of {} in doubt committed; errors {:?}",
            self.ledger.acked.len(),
            self.ledger.doubtful.len(),
            self.ledger.errors
        );
        Ok(())
    }

    /// One fault on a serving cluster: `cut` makes it, `minority` must
    /// refuse and `majority` serve while it lasts, then it is healed and
    /// everything checked. A minority node's teller gets nothing
    /// acknowledged that it sent after the node first refused: that would
    /// be a second primary component.
    fn round(&mut self, name: &str, cut: impl FnOnce(&Net) -> Result<()>, minority: &[usize]) -> Result<()> {
        let bank = self.open_bank()?;
        cut(&self.net)?;
        let majority: Vec<usize> = self.all().into_iter().filter(|i| !minority.contains(i)).collect();
        let refused: Vec<(usize, Instant)> =
            minority.iter().map(|&i| Ok((i, rounds::refuses(&self.c, i, SETTLE)?))).collect::<Result<_>>()?;
        self.serves(&bank, &majority)?;
        for (i, at) in &refused {
            ensure!(bank.acks_since(*i, *at) == 0, "{name}: node {i} acknowledged transfers while refusing");
            ensure!(self.c.is_running(*i), "{name}: node {i}'s mariadbd exited");
        }
        self.heal(&bank).with_context(|| format!("healing the {name}"))?;
        self.close(name, bank)
    }

    fn leader(&self) -> Result<usize> {
        let name = status(self.c.node(1), "wsrep_group_leader")?;
        let i = self.c.nodes().iter().find(|n| n.name == name).map(|n| n.index);
        i.with_context(|| format!("the group leader is {name:?}, no node of ours"))
    }
}

/// The three-node faults, one after another on one cluster (a cluster per
/// fault would cost more time than the faults): a symmetric partition, a
/// one-way loss, an isolated leader, and a flapping link.
#[test]
#[ignore = "needs network namespaces: make test-partitions"]
fn three_nodes_through_partitions_lose_no_acknowledged_transfer() -> Result<()> {
    let mut p = partitioned(3)?;

    // Node 3 on one side, 1 and 2 on the other.
    p.round("symmetric partition", |net| net.split(&[3], &[1, 2]), &[3])?;

    // Node 3 hears nothing, but what it sends still arrives: its vote
    // requests and its half of every TCP connection reach the others.
    p.round("one-way loss", |net| net.block(1, 3).and(net.block(2, 3)), &[3])?;

    // The member that orders everything, cut off from both others.
    let leader = p.leader()?;
    let others: Vec<usize> = p.all().into_iter().filter(|&i| i != leader).collect();
    eprintln!("partitions: isolating the leader, node {leader}");
    p.round("isolated leader", |net| net.split(&[leader], &others), &[leader])?;
    let new_leader = p.leader()?;
    eprintln!("partitions: the leader is now node {new_leader}");

    // Node 2's cable in and out every 2 s for 20 s, losing a tenth of what it
    // receives while plugged in. Nodes 1 and 3 stay a majority throughout.
    let bank = p.open_bank()?;
    p.net.loss(2, 10)?;
    let start = Instant::now();
    for _ in 0..5 {
        p.net.link(2, false)?;
        std::thread::sleep(Duration::from_secs(2));
        p.net.link(2, true)?;
        std::thread::sleep(Duration::from_secs(2));
    }
    ensure!(bank.acks_since(1, start) > 0, "nodes 1 and 3 served nothing while node 2's link flapped");
    p.heal(&bank).context("healing the flapping link")?;
    p.close("flapping link", bank)
}

/// Four nodes, node 1 weighing 2 (`pc.weight`): split 2+2, the side with
/// node 1 holds 3 of 5 and stays primary, the other refuses.
#[test]
#[ignore = "needs network namespaces: make test-partitions"]
fn weighted_two_two_split_keeps_the_heavier_half() -> Result<()> {
    let mut p = partitioned(4)?;
    sql(p.c.node(1), "SET GLOBAL wsrep_provider_options='pc.weight=2'").map_err(anyhow::Error::msg)?;
    for i in p.all() {
        let node = p.c.node(i).clone();
        wait_for("the weights everywhere", SETTLE, || Ok(status_i64(&node, "wsrep_cluster_weight")? == 5))?;
    }
    p.round("weighted 2+2 split", |net| net.split(&[1, 2], &[3, 4]), &[3, 4])
}

/// The network the tests above cut really is cut: a node cut off cannot
/// reach another's group port, and can again once healed. Without this, a
/// fault the kernel silently ignored would let the tests above pass.
#[test]
#[ignore = "needs network namespaces: make test-partitions"]
fn a_cut_link_carries_nothing_until_healed() -> Result<()> {
    let net = Net::new(2)?;
    let reach = |from: usize, to: usize| -> Result<bool> {
        let target = format!("/dev/tcp/{}/9", Net::address(to));
        // A listener on node `to`, one connection attempt from node `from`.
        let mut listener = std::process::Command::new("ip")
            .args(["netns", "exec", &net.namespace(to), "socat", "-u", "TCP-LISTEN:9,reuseaddr", "-"])
            .stdout(std::process::Stdio::null())
            .spawn()?;
        std::thread::sleep(Duration::from_millis(300));
        let ok = std::process::Command::new("ip")
            .args(["netns", "exec", &net.namespace(from), "timeout", "3", "bash", "-c", &format!("echo x > {target}")])
            .status()?
            .success();
        let _ = listener.kill();
        let _ = listener.wait();
        Ok(ok)
    };
    ensure!(reach(1, 2)?, "node 1 cannot reach node 2 on a whole network");
    net.block(2, 1)?;
    ensure!(!reach(1, 2)?, "node 1 reached node 2 with node 2's replies dropped");
    net.heal()?;
    ensure!(reach(1, 2)?, "node 1 cannot reach node 2 after the heal");
    net.link(2, false)?;
    ensure!(!reach(1, 2)?, "node 1 reached node 2 with node 2's link down");
    Ok(())
}
