//! `tandem cluster bootstrap --remote`: bring a real cluster back from its
//! most advanced node when its primary component is gone for good.
//!
//! The facts live on each host (see [`super::position`]), so each host is
//! asked over ssh (`tandem node position`), the answers are weighed as for
//! a local cluster ([`crate::cluster::choose_bootstrap`]), and only then
//! does anything start: the chosen host bootstraps (`tandem node
//! bootstrap`: `pc.bootstrap=YES` if its server runs, else grastate.dat
//! marked safe and `galera_new_cluster`), and the others are started
//! (`systemctl start mariadb`) and waited for one by one. A host that does
//! not answer stops it all before anything starts: the missing one might
//! be the most advanced, and bootstrapping another would lose what only it
//! holds.

use super::position::{Position, ServerConfig};
use super::{execute, Endpoint, Login};
use crate::cluster::bootstrap::mark_safe_to_bootstrap;
use crate::cluster::{choose_bootstrap, Candidate};
use anyhow::{bail, Context, Result};
use std::process::{Command, Stdio};
use std::time::Duration;

/// What to do, and how to reach the hosts.
#[derive(Clone, Debug)]
pub struct Plan {
    pub hosts: Vec<String>,
    /// The program that runs a command on a host, and its arguments; the
    /// host, then the command, are added (`ssh HOST COMMAND`).
    pub ssh: Vec<String>,
    /// How `tandem` is run there (a path, or `sudo tandem`).
    pub tandem: String,
    /// Added to every `tandem node` command there (`--defaults-file`,
    /// `--user`, `--password-file`).
    pub node_args: String,
    /// Starts the chosen host's server as a new cluster when it is stopped.
    pub new_cluster: String,
    /// Starts the server of every other stopped host.
    pub start: String,
    /// The host to bootstrap instead of the most advanced one.
    pub wanted: Option<String>,
    pub force: bool,
    /// Only bootstrap; leave the other hosts as they are.
    pub only: bool,
    /// Only say which host would be bootstrapped.
    pub dry_run: bool,
    pub timeout: Duration,
}

/// What `run` found and did.
#[derive(Debug)]
pub struct Outcome {
    pub candidates: Vec<Candidate>,
    /// 1-based, as `Candidate::index`.
    pub chosen: usize,
    /// Hosts whose server was started afterwards.
    pub started: Vec<usize>,
}

pub fn run(plan: &Plan, say: &dyn Fn(&str)) -> Result<Outcome> {
    if plan.ssh.is_empty() {
        bail!("--ssh names no program");
    }
    let positions = gather(plan)?;
    if let Some(i) = positions.iter().position(|p| p.primary) {
        bail!(
            "{} is in a primary component already: start the other nodes instead (systemctl start mariadb)",
            plan.hosts[i]
        );
    }
    let candidates: Vec<Candidate> =
        positions.iter().zip(&plan.hosts).enumerate().map(|(i, (p, host))| p.candidate(i + 1, host)).collect();
    let wanted = match &plan.wanted {
        None => None,
        Some(host) => Some(
            plan.hosts
                .iter()
                .position(|h| h == host)
                .map(|i| i + 1)
                .with_context(|| format!("{host} is not one of the hosts ({})", plan.hosts.join(",")))?,
        ),
    };
    let chosen = choose_bootstrap(&candidates, wanted, plan.force)?;
    let mut outcome = Outcome { candidates, chosen, started: vec![] };
    if plan.dry_run {
        return Ok(outcome);
    }
    let host = &plan.hosts[chosen - 1];
    say(&format!("{host}: bootstrapping"));
    let command = tandem_node(
        plan,
        &format!(
            "bootstrap --new-cluster-command {} --timeout {}",
            shell_quote(&plan.new_cluster),
            plan.timeout.as_secs()
        ),
    );
    on_host(plan, host, &command, Output::Shown)?;
    if plan.only {
        return Ok(outcome);
    }
    for c in outcome.candidates.iter().filter(|c| c.index != chosen) {
        let host = &plan.hosts[c.index - 1];
        if !c.running {
            say(&format!("{host}: starting ({})", plan.start));
            on_host(plan, host, &plan.start, Output::Shown)?;
            outcome.started.push(c.index);
        }
        let wait = tandem_node(plan, &format!("wait-synced --timeout {}", plan.timeout.as_secs()));
        on_host(plan, host, &wait, Output::Shown)?;
    }
    Ok(outcome)
}

/// Every host's position, asked for all at once (a recovery takes seconds
/// per host). Any failure fails the whole: see the module's comment.
fn gather(plan: &Plan) -> Result<Vec<Position>> {
    let command = tandem_node(plan, "position");
    let answers: Vec<Result<String>> = std::thread::scope(|s| {
        let asked: Vec<_> =
            plan.hosts.iter().map(|host| s.spawn(|| on_host(plan, host, &command, Output::Captured))).collect();
        asked.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("panicked")))).collect()
    });
    let mut out = vec![];
    let mut failed = vec![];
    for (host, answer) in plan.hosts.iter().zip(answers) {
        match answer.and_then(|text| Position::parse(&text).with_context(|| format!("{host}: {command}"))) {
            Ok(p) => out.push(p),
            Err(e) => failed.push(format!("{e:#}")),
        }
    }
    if !failed.is_empty() {
        bail!(
            "{} of {} hosts gave no position, so the most advanced one is not known and nothing was started:\n{}",
            failed.len(),
            plan.hosts.len(),
            failed.join("\n")
        );
    }
    Ok(out)
}

/// `tandem node <what>` with the node arguments, as the remote shell reads it.
fn tandem_node(plan: &Plan, what: &str) -> String {
    let parts = [plan.tandem.as_str(), "node", what, plan.node_args.trim()];
    parts.iter().filter(|p| !p.is_empty()).copied().collect::<Vec<_>>().join(" ")
}

#[derive(Clone, Copy, PartialEq)]
enum Output {
    /// Returned (a position).
    Captured,
    /// Shown to the operator as it comes (progress of a start or a wait).
    Shown,
}

/// Runs `command` on `host` through `plan.ssh`; its stdout when captured.
fn on_host(plan: &Plan, host: &str, command: &str, output: Output) -> Result<String> {
    let mut cmd = Command::new(&plan.ssh[0]);
    cmd.args(&plan.ssh[1..]).arg(host).arg(command).stdin(Stdio::null());
    if output == Output::Shown {
        let status = cmd.status().with_context(|| format!("running {}", plan.ssh[0]))?;
        if !status.success() {
            bail!("{host}: `{command}` failed ({status}); its output is above");
        }
        return Ok(String::new());
    }
    let done = cmd.output().with_context(|| format!("running {}", plan.ssh[0]))?;
    if !done.status.success() {
        let stderr = String::from_utf8_lossy(&done.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(12).collect::<Vec<_>>().into_iter().rev().collect();
        bail!("{host}: `{command}` failed ({}):\n{}", done.status, tail.join("\n"));
    }
    Ok(String::from_utf8_lossy(&done.stdout).into_owned())
}

/// `text` as one word of a POSIX shell command line.
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// `tandem node bootstrap`, on the chosen host: makes its node a new
/// primary component and waits until it is Synced. Says how.
pub fn bootstrap_here(config: &ServerConfig, login: &Login, new_cluster: &str, timeout: Duration) -> Result<String> {
    let client = crate::cluster::find_program("mariadb")?;
    let at = Endpoint::Socket(config.socket.clone());
    let how = match super::position::server_status(&client, config, login)? {
        Some(status) if status.get("wsrep_cluster_status").is_some_and(|s| s == "Primary") => {
            "nothing to do: it is in a primary component already".to_string()
        }
        Some(_) => {
            execute(&client, &at, login, "SET GLOBAL wsrep_provider_options='pc.bootstrap=YES'")
                .context("pc.bootstrap=YES was refused")?;
            "pc.bootstrap=YES on the running server".to_string()
        }
        None => {
            // The comparison was made by whoever chose this host: a node
            // that left first has `safe_to_bootstrap: 0`, which the server
            // would refuse.
            mark_safe_to_bootstrap(&config.datadir)?;
            let status = Command::new("sh")
                .args(["-c", new_cluster])
                .stdin(Stdio::null())
                .status()
                .with_context(|| format!("running {new_cluster}"))?;
            if !status.success() {
                bail!("`{new_cluster}` failed ({status})");
            }
            format!("started with `{new_cluster}`")
        }
    };
    super::wait_synced(&client, &at, login, Some(timeout))?;
    Ok(how)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_word_survives_the_remote_shell() {
        for text in ["galera_new_cluster", "systemctl restart 'mariadb'", "a b;c $HOME `x` \"q\"", ""] {
            let out = Command::new("sh").args(["-c", &format!("printf %s {}", shell_quote(text))]).output().unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), text);
        }
    }

    fn plan(ssh: Vec<String>) -> Plan {
        Plan {
            hosts: vec!["db1".into(), "db2".into()],
            ssh,
            tandem: "tandem".into(),
            node_args: String::new(),
            new_cluster: "galera_new_cluster".into(),
            start: "systemctl start mariadb".into(),
            wanted: None,
            force: false,
            only: false,
            dry_run: true,
            timeout: Duration::from_secs(1),
        }
    }

    /// A stand-in for ssh: `sh -c SCRIPT HOST COMMAND` runs SCRIPT with
    /// the host as $0 and the command as $1.
    fn fake_ssh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    #[test]
    fn a_host_without_an_answer_stops_everything() {
        let answer = Position {
            datadir: "/d".into(),
            running: false,
            primary: false,
            log_last: Some((2, 40)),
            log_note: None,
            seqno: Some(40),
        }
        .render();
        let script = format!("if [ \"$0\" = db1 ]; then printf '%s' {}; else echo 'ssh: connect to host db2: No route to host' >&2; exit 255; fi", shell_quote(&answer));
        let err = format!("{:#}", run(&plan(fake_ssh(&script)), &|_| {}).unwrap_err());
        assert!(err.contains("1 of 2 hosts gave no position"), "{err}");
        assert!(err.contains("db2: `tandem node position` failed"), "{err}");
        assert!(err.contains("No route to host"), "{err}");
    }

    #[test]
    fn the_most_advanced_host_is_chosen_and_a_primary_one_stops_it() {
        let at = |seqno: i64, primary: bool| {
            Position {
                datadir: "/d".into(),
                running: primary,
                primary,
                log_last: Some((2, seqno as u64)),
                log_note: None,
                seqno: Some(seqno),
            }
            .render()
        };
        let script = |a: &str, b: &str| {
            format!("if [ \"$0\" = db1 ]; then printf '%s' {}; else printf '%s' {}; fi", shell_quote(a), shell_quote(b))
        };
        let outcome = run(&plan(fake_ssh(&script(&at(40, false), &at(55, false)))), &|_| {}).unwrap();
        assert_eq!(outcome.chosen, 2, "{:?}", outcome.candidates);
        assert_eq!(outcome.candidates[1].name, "db2");

        let mut wanted = plan(fake_ssh(&script(&at(40, false), &at(55, false))));
        wanted.wanted = Some("db1".into());
        let err = format!("{:#}", run(&wanted, &|_| {}).unwrap_err());
        assert!(err.contains("db1 is less advanced"), "{err}");
        wanted.wanted = Some("db9".into());
        let err = format!("{:#}", run(&wanted, &|_| {}).unwrap_err());
        assert!(err.contains("db9 is not one of the hosts (db1,db2)"), "{err}");

        let err = format!("{:#}", run(&plan(fake_ssh(&script(&at(40, false), &at(55, true)))), &|_| {}).unwrap_err());
        assert!(err.contains("db2 is in a primary component already"), "{err}");
    }
}
