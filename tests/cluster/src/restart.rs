//! Stopping nodes the way a DBA's rolling restart does, with the one bound
//! a rolling restart relies on: a clean stop ends. `Cluster::stop` turns a
//! stop that hangs into a SIGKILL after a minute without a word; here it is
//! a failure, with the threads' stacks of the process that did not stop.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tandem::cluster::Cluster;

use crate::{error_log, status};

/// How long a clean stop may take, leader included. A liveness bound, not
/// a benchmark: Galera stops in seconds under the same load.
pub const STOP_BOUND: Duration = Duration::from_secs(60);

/// SIGTERM to node `i`, and an error if its mariadbd is still there after
/// `bound` (it is killed then, with its stacks in the error). Returns how
/// long the stop took.
pub fn stop_within(c: &mut Cluster, i: usize, bound: Duration) -> Result<Duration> {
    let pid = c.node(i).pid.with_context(|| format!("node {i} is not running"))?;
    let started = Instant::now();
    send_signal(pid, "TERM")?;
    while c.is_running(i) {
        if started.elapsed() > bound {
            let stacks = thread_stacks(pid);
            let log = crate::tail(&error_log(c.node(i)));
            c.kill(i)?;
            bail!(
                "node {i} (pid {pid}) did not stop within {bound:?} of SIGTERM; killed. Its threads:\n{stacks}\n\
                 The end of its error log:\n{log}"
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    c.stop(i)?; // gone already: only records it
    Ok(started.elapsed())
}

/// SIGTERM to node `i`, then SIGKILL as soon as its error log says it is
/// handing its leadership over (or leaving): a crash in the middle of a
/// clean stop.
pub fn kill_while_leaving(c: &mut Cluster, i: usize) -> Result<()> {
    let pid = c.node(i).pid.with_context(|| format!("node {i} is not running"))?;
    let before = error_log(c.node(i)).len();
    send_signal(pid, "TERM")?;
    // Looked for every few milliseconds: the hand-over takes a fraction of
    // a second, and the kill is meant to land inside it.
    let started = Instant::now();
    while !error_log(c.node(i)).get(before..).is_some_and(|new| new.contains("leaving the group")) {
        if started.elapsed() > STOP_BOUND {
            let stacks = thread_stacks(pid);
            let log = crate::tail(&error_log(c.node(i)));
            bail!(
                "node {i} (pid {pid}) did not start leaving the group within {STOP_BOUND:?} of SIGTERM. \
                 Its threads:\n{stacks}\nThe end of its error log:\n{log}"
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let handed_over = error_log(c.node(i)).get(before..).is_some_and(|new| new.contains("handed the leadership over"));
    c.kill(i)?;
    println!("node {i} killed while leaving (hand-over already done: {handed_over})");
    Ok(())
}

/// Every node killed with -9 by one kill(1), so that none outlives the
/// others by more than the signal's delivery, then each reaped and
/// recorded as stopped: a power cut of the whole cluster.
pub fn kill_all(c: &mut Cluster) -> Result<()> {
    let pids: Vec<String> = c.nodes().iter().map(|n| n.pid.expect("every node runs").to_string()).collect();
    let killed = Command::new("kill").arg("-9").args(&pids).status()?;
    anyhow::ensure!(killed.success(), "kill -9 {pids:?} failed");
    for i in 1..=c.len() {
        c.kill(i)?;
    }
    Ok(())
}

/// The node whose name `wsrep_group_leader` gives, as node `asked` sees it.
pub fn leader(c: &Cluster, asked: usize) -> Result<usize> {
    let name = status(c.node(asked), "wsrep_group_leader")?;
    let i = c.nodes().iter().find(|n| n.name == name).map(|n| n.index);
    i.with_context(|| format!("the group leader is {name:?}, no node of ours"))
}

/// kill -`name` (TERM, KILL, STOP, CONT) to `pid`.
pub fn send_signal(pid: u32, name: &str) -> Result<()> {
    let ok = Command::new("kill").arg(format!("-{name}")).arg(pid.to_string()).status()?.success();
    if !ok {
        bail!("kill -{name} {pid} failed");
    }
    Ok(())
}

/// Every thread's stack, as gdb takes them (a note when it cannot).
fn thread_stacks(pid: u32) -> String {
    let out = Command::new("timeout")
        .args(["120", "gdb", "-p", &pid.to_string(), "-batch", "-ex", "thread apply all bt 12"])
        .output();
    match out {
        Ok(o) => String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.starts_with('#') || l.starts_with("Thread"))
            .map(|l| l.chars().take(200).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => format!("(no stacks: gdb did not run: {e})"),
    }
}

/// sysbench `oltp_write_only` on every node, in runs of a few seconds one
/// after another until stopped, errors ignored (a node being restarted
/// refuses, and its writer tries again): the load of the rolling restart
/// that hung, beside the bank's tellers that the checks read.
pub struct WriteLoad {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    writers: Vec<std::thread::JoinHandle<u64>>,
}

const LOAD_TABLES: [&str; 2] = ["--tables=2", "--table-size=2000"];

impl WriteLoad {
    /// Creates sbtest on node 1, then starts `threads` clients per node.
    pub fn start(c: &Cluster, threads: usize) -> Result<WriteLoad> {
        crate::sql(c.node(1), "CREATE DATABASE sbtest").map_err(anyhow::Error::msg)?;
        crate::sysbench(c.node(1), &[&LOAD_TABLES[..], &["oltp_write_only", "prepare"]].concat())?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers = c
            .nodes()
            .iter()
            .map(|node| {
                let (node, stop) = (node.clone(), stop.clone());
                std::thread::spawn(move || {
                    let threads = format!("--threads={threads}");
                    let mut runs = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let args = [
                            &LOAD_TABLES[..],
                            &[&threads, "--time=3", "--mysql-ignore-errors=all"],
                            &["oltp_write_only", "run"],
                        ]
                        .concat();
                        match crate::sysbench(&node, &args) {
                            Ok(_) => runs += 1,
                            Err(_) => std::thread::sleep(Duration::from_millis(500)),
                        }
                    }
                    runs
                })
            })
            .collect();
        Ok(WriteLoad { stop, writers })
    }

    /// Stops the clients; returns how many runs ended well, all nodes together.
    pub fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.writers.into_iter().map(|w| w.join().unwrap_or(0)).sum()
    }
}
