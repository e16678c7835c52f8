//! Getting a cluster back when its primary component is gone for good, and
//! never starting one on a guess:
//! - `tandem cluster bootstrap` picks the most advanced node (the longest
//!   group log), refuses a less advanced one unless forced, and the others
//!   rejoin it with nothing acknowledged lost;
//! - `pc.bootstrap=YES` makes a running minority primary again;
//! - `--wsrep-new-cluster` on a node whose grastate.dat says
//!   `safe_to_bootstrap: 0` is refused with Galera's message;
//! - a node whose data position is unknown (killed, then started with no
//!   `wsrep_start_position`) recovers it itself, or, when that is
//!   impossible, refuses to join (or takes an SST if configured).

use std::time::Duration;

use anyhow::{ensure, Context};
use tandem::cluster::Start;
use tandem_cluster_tests::*;

const TABLE: &str = "boot.rows";
const SYNCED: Duration = Duration::from_secs(300);

fn count(c: &TestCluster, i: usize) -> anyhow::Result<u64> {
    let n = sql(c.node(i), &format!("SET SESSION wsrep_sync_wait=1; SELECT COUNT(*) FROM {TABLE}"))
        .map_err(anyhow::Error::msg)?;
    n.parse().with_context(|| format!("row count {n:?}"))
}

fn wait_cluster_status(c: &TestCluster, i: usize, want: &str) -> anyhow::Result<()> {
    wait_for(&format!("node {i} to be {want}"), Duration::from_secs(60), || {
        Ok(status(c.node(i), "wsrep_cluster_status")? == want)
    })
    .map(drop)
}

/// 100 rows on all three; node 3 stops; nodes 1 and 2 take 500 more and are
/// killed: every node is down, and node 3's history is the shortest.
fn node3_behind_then_the_others_killed(c: &mut TestCluster) -> anyhow::Result<()> {
    create_rows_table(c.node(1), TABLE)?;
    insert_rows(c.node(1), TABLE, 1, 0, 100, 100)?;
    c.stop(3)?;
    insert_rows(c.node(1), TABLE, 1, 100, 250, 100)?;
    insert_rows(c.node(2), TABLE, 2, 0, 250, 100)?;
    c.kill(1)?;
    c.kill(2)
}

/// Node 3 stops early; nodes 1 and 2 take 500 more commits and are killed.
/// Node 3's log is behind: bootstrapping it would lose those 500, so it is
/// refused; the default choice is node 1 or 2, and all 600 rows survive.
#[test]
fn bootstrap_starts_from_the_most_advanced_node_and_refuses_a_less_advanced_one() -> anyhow::Result<()> {
    let mut c = up(3)?;
    node3_behind_then_the_others_killed(&mut c)?;

    let candidates = c.bootstrap_candidates()?;
    println!("{candidates:#?}");
    ensure!(candidates.iter().all(|n| !n.running), "every node is down");
    ensure!(candidates.iter().all(|n| n.log_last.is_some()), "every node's group log is read: {candidates:?}");
    ensure!(candidates[2].log_last < candidates[0].log_last, "node 3's log is behind node 1's: {candidates:?}");

    let refused = c.bootstrap(Some(3), false, false, SYNCED).expect_err("node 3 is less advanced");
    let refused = format!("{refused:#}");
    ensure!(refused.contains("node3 is less advanced"), "the refusal names the node: {refused}");
    ensure!(refused.contains("--force"), "and the override: {refused}");
    ensure!(!c.is_running(3), "a refused bootstrap starts nothing");

    let outcome = c.bootstrap(None, false, false, SYNCED)?;
    println!("bootstrapped node {} ({:?})", outcome.chosen, outcome.candidates);
    ensure!(outcome.chosen != 3, "the most advanced node is bootstrapped, not node 3");
    ensure!(!outcome.in_place, "it was stopped: started with --wsrep-new-cluster");
    ensure!(outcome.started.len() == 2, "the two others were started: {:?}", outcome.started);
    for i in 1..=3 {
        ensure!(status(c.node(i), "wsrep_cluster_size")? == "3", "node {i} sees 3 members");
        ensure!(count(&c, i)? == 600, "node {i} holds every acknowledged row");
    }
    insert_rows(c.node(3), TABLE, 3, 0, 10, 10)?;
    assert_identical(&c, &[TABLE])
}

/// Nodes 2 and 3 die: node 1 is a minority and stops serving. An operator's
/// `pc.bootstrap=YES` makes it primary again; the others rejoin later.
#[test]
fn pc_bootstrap_makes_a_running_minority_primary() -> anyhow::Result<()> {
    let mut c = up(3)?;
    create_rows_table(c.node(1), TABLE)?;
    insert_rows(c.node(1), TABLE, 1, 0, 100, 100)?;
    c.kill(2)?;
    c.kill(3)?;
    wait_cluster_status(&c, 1, "non-Primary")?;
    let refused = sql(c.node(1), &format!("INSERT INTO {TABLE} VALUES (9, 9, 'x')"));
    ensure!(refused.is_err(), "a minority does not take writes: {refused:?}");

    sql(c.node(1), "SET GLOBAL wsrep_provider_options='pc.bootstrap=YES'").map_err(anyhow::Error::msg)?;
    wait_cluster_status(&c, 1, "Primary")?;
    c.wait_synced(1, SYNCED)?;
    ensure!(status(c.node(1), "wsrep_cluster_size")? == "1", "a component of one");
    insert_rows(c.node(1), TABLE, 1, 100, 50, 100)?;

    for i in [2, 3] {
        c.start(i)?;
        c.wait_synced(i, SYNCED)?;
    }
    for i in 1..=3 {
        ensure!(status(c.node(i), "wsrep_cluster_size")? == "3", "node {i} sees 3 members");
        ensure!(count(&c, i)? == 150, "node {i} holds every row");
    }
    assert_identical(&c, &[TABLE])
}

/// Stopped one after the other, only the last node to leave may bootstrap:
/// the first one's grastate.dat says `safe_to_bootstrap: 0` and
/// `--wsrep-new-cluster` is refused there, in Galera's words.
#[test]
fn new_cluster_on_a_node_not_safe_to_bootstrap_is_refused() -> anyhow::Result<()> {
    let mut c = up(3)?;
    create_rows_table(c.node(1), TABLE)?;
    insert_rows(c.node(1), TABLE, 1, 0, 50, 100)?;
    // One at a time, each leave seen by the rest before the next (as an
    // operator stopping a cluster node by node would).
    for i in 1..=3 {
        c.stop(i)?;
        for rest in i + 1..=3 {
            // Primary too: the size can read right during a moment
            // without a primary component, and a node stopped then is
            // not the one that left last.
            wait_for(&format!("node {rest} to see node {i} leave"), Duration::from_secs(60), || {
                Ok(status(c.node(rest), "wsrep_cluster_size")? == (3 - i).to_string()
                    && status(c.node(rest), "wsrep_cluster_status")? == "Primary")
            })?;
        }
    }
    let grastate = |i: usize| std::fs::read_to_string(c.node(i).datadir.join("grastate.dat")).unwrap_or_default();
    ensure!(grastate(1).contains("safe_to_bootstrap: 0"), "node 1 left first:\n{}", grastate(1));
    ensure!(grastate(3).contains("safe_to_bootstrap: 1"), "node 3 left last:\n{}", grastate(3));

    let from = error_log(c.node(1)).len();
    c.start_with(1, &Start { bootstrap: true, ..Start::default() })?;
    wait_for("node 1 to exit", Duration::from_secs(60), || Ok(!c.is_running(1)))?;
    let log = error_log(c.node(1))[from..].to_string();
    ensure!(
        log.contains("It may not be safe to bootstrap the cluster from this node"),
        "Galera's refusal is logged:\n{log}"
    );

    c.start_with(3, &Start { bootstrap: true, ..Start::default() })?;
    c.wait_synced(3, SYNCED)?;
    for i in [1, 2] {
        c.start(i)?;
        c.wait_synced(i, SYNCED)?;
    }
    for i in 1..=3 {
        ensure!(count(&c, i)? == 50, "node {i} holds every row");
    }
    assert_identical(&c, &[TABLE])
}

/// A node killed and started as a bare `mariadbd` (no `--wsrep-recover`
/// before it) reads its position itself and rejoins by IST; if it cannot
/// (here: the recovery is made impossible), it refuses to join rather than
/// guess, and `repl.unknown_position=sst` lets it take an SST instead.
#[test]
fn an_unknown_position_is_recovered_or_refused_never_guessed() -> anyhow::Result<()> {
    // The provider runs `mariadbd --wsrep-recover` itself unless it is told
    // it is inside a recovery already: that stands for a recovery that fails.
    let impossible = || vec![("TANDEM_RECOVERING".to_string(), "1".to_string())];
    let mut c = up(3)?;
    create_rows_table(c.node(1), TABLE)?;
    insert_rows(c.node(1), TABLE, 1, 0, 100, 100)?;
    count(&c, 3)?;

    // Recovered by the provider: IST, no SST.
    c.kill(3)?;
    put_no_sst_marker(c.node(3))?;
    insert_rows(c.node(1), TABLE, 1, 100, 100, 100)?;
    let from = error_log(c.node(3)).len();
    c.start_with(3, &Start { skip_recovery: true, ..Start::default() })?;
    c.wait_synced(3, SYNCED)?;
    let log = error_log(c.node(3))[from..].to_string();
    ensure!(log.contains("Recovered the position of the local data after a crash"), "recovered itself:\n{log}");
    ensure!(has_no_sst_marker(c.node(3)), "and rejoined without an SST");
    ensure!(count(&c, 3)? == 200, "with every row");

    // Not recoverable: refused, the others untouched.
    c.kill(3)?;
    insert_rows(c.node(1), TABLE, 1, 200, 100, 100)?;
    let from = error_log(c.node(3)).len();
    c.start_with(3, &Start { skip_recovery: true, env: impossible(), ..Start::default() })?;
    wait_for("node 3 to give up", Duration::from_secs(120), || Ok(!c.is_running(3)))?;
    let log = error_log(c.node(3))[from..].to_string();
    ensure!(log.contains("is unknown"), "the refusal says why:\n{log}");
    ensure!(log.contains("wsrep-recover"), "and names the fix:\n{log}");
    ensure!(!log.contains("Synchronized with group"), "it never joined:\n{log}");
    // Its previous process is dropped from the group like any silent member.
    wait_for("the others to go on without it", Duration::from_secs(120), || {
        Ok(status(c.node(1), "wsrep_cluster_size")? == "2")
    })?;

    // Configured to replace its data: an SST.
    let sst = Start {
        skip_recovery: true,
        env: impossible(),
        provider_options: vec![("repl.unknown_position".into(), "sst".into())],
        ..Start::default()
    };
    c.start_with(3, &sst)?;
    c.wait_synced(3, SYNCED)?;
    ensure!(!has_no_sst_marker(c.node(3)), "an SST replaced the data");
    ensure!(count(&c, 3)? == 300, "with every row");
    assert_identical(&c, &[TABLE])
}

/// Stops, by the pids the CLI recorded, whatever the `tandem` commands of a
/// test started: those servers are not children of the test's `Cluster`.
struct StopRecorded(std::path::PathBuf);

impl Drop for StopRecorded {
    fn drop(&mut self) {
        if let Ok(mut c) = tandem::cluster::Cluster::open(&self.0) {
            for i in (1..=c.len()).rev() {
                let _ = c.stop(i);
            }
        }
    }
}

/// `tandem cluster bootstrap --remote` on a real cluster, each host asked
/// over ssh. Here "ssh" is a script that runs the command locally with the
/// host's option files (`MYSQL_HOME=<cluster>/<host>`, the server's own
/// lookup), so every host-side step is the real one: `tandem node
/// position` reads each node's group log, grastate.dat and InnoDB
/// position; the most advanced host is chosen, a less advanced one is
/// refused, a host that does not answer stops everything, and the others
/// are started and waited for. Nothing acknowledged is lost.
#[test]
fn bootstrap_of_a_real_cluster_asks_every_host_over_ssh() -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut c = up(3)?;
    let _stop = StopRecorded(c.dir().to_path_buf());
    node3_behind_then_the_others_killed(&mut c)?;

    let tandem = tandem::cluster::sst_script::tandem_binary().context("the tandem binary is built beside the tests")?;
    let tandem = tandem.to_str().context("tandem's path")?.to_string();
    let ssh = c.dir().join("fake-ssh");
    std::fs::write(
        &ssh,
        format!(
            "#!/bin/sh\nhost=$1; shift\n\
             if [ \"$host\" = down ]; then echo \"ssh: connect to host down port 22: Connection refused\" >&2; exit 255; fi\n\
             export MYSQL_HOME='{dir}'/$host N=${{host#node}}\nexec sh -c \"$*\"\n",
            dir = c.dir().display()
        ),
    )?;
    std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755))?;
    let dir = c.dir().display().to_string();
    let start = format!("{tandem} cluster start-node $N --dir {dir}");
    let run = |extra: &[&str], hosts: &str| -> anyhow::Result<(bool, String)> {
        let mut args = vec!["cluster", "bootstrap", "--remote", hosts, "--ssh", ssh.to_str().unwrap()];
        args.extend(["--remote-tandem", &tandem, "--timeout", "300"]);
        args.extend(extra);
        let out = std::process::Command::new(&tandem).args(&args).output()?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        println!("$ tandem {}\n{text}", args.join(" "));
        Ok((out.status.success(), text))
    };
    let running = || -> anyhow::Result<usize> {
        let mut now = tandem::cluster::Cluster::open(c.dir())?;
        Ok((1..=3).filter(|&i| now.is_running(i)).count())
    };
    let hosts = "node1,node2,node3";

    let (ok, shown) = run(&["--dry-run"], hosts)?;
    ensure!(ok, "a dry run shows the positions: {shown}");
    let chosen = shown.lines().find(|l| l.contains("<- would be bootstrapped")).context("no choice shown")?;
    ensure!(!chosen.starts_with("node3"), "node 3 missed 500 commits: {shown}");
    let node3 = shown.lines().find(|l| l.starts_with("node3")).context("node3's row")?;
    let node1 = shown.lines().find(|l| l.starts_with("node1")).context("node1's row")?;
    ensure!(node3.contains("stopped") && node1.contains("stopped"), "{shown}");
    ensure!(running()? == 0, "a dry run starts nothing");

    let (ok, refused) = run(&["--node", "node3"], hosts)?;
    ensure!(!ok && refused.contains("node3 is less advanced"), "{refused}");
    ensure!(refused.contains("--force"), "the override is named: {refused}");
    let (ok, unreachable) = run(&[], &format!("{hosts},down"))?;
    ensure!(!ok && unreachable.contains("1 of 4 hosts gave no position"), "{unreachable}");
    ensure!(unreachable.contains("Connection refused"), "ssh's own words are shown: {unreachable}");
    ensure!(running()? == 0, "a refusal starts nothing");

    let new_cluster = format!("{start} --bootstrap");
    let (ok, done) = run(&["--safest", "--new-cluster-command", &new_cluster, "--start-command", &start], hosts)?;
    ensure!(ok, "{done}");
    ensure!(done.contains("bootstrapped; 2 other host(s) started and rejoined"), "{done}");
    ensure!(running()? == 3, "every node runs");
    for i in 1..=3 {
        ensure!(status(c.node(i), "wsrep_local_state_comment")? == "Synced", "node {i} is Synced");
        ensure!(status(c.node(i), "wsrep_cluster_size")? == "3", "node {i} sees 3 members");
        ensure!(count(&c, i)? == 600, "node {i} holds every acknowledged row");
    }
    insert_rows(c.node(3), TABLE, 3, 0, 10, 10)?;
    assert_identical(&c, &[TABLE])
}
