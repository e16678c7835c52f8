//! Whether a node may take client traffic, decided the way the field's
//! checks decide it.
//!
//! The HTTP check follows Galera's clustercheck: a node is available when it
//! is in the primary component and synced, or a donor/desynced node when the
//! operator says donors count (clustercheck's `AVAILABLE_WHEN_DONOR`). A
//! proxy that only sees 200 or 503 can do no better.
//!
//! The agent check (HAProxy's `agent-check`) can: it keeps a donor's open
//! sessions (`drain` instead of `down`), and gives a synced node that falls
//! behind a lower weight before it drains it, so reads move away from stale
//! data while the node still counts.

/// The node as the check sees it, read when the check arrives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// `wsrep_local_state`: 0 initialized, 1 joining, 2 donor/desynced,
    /// 3 joined, 4 synced.
    pub state: i64,
    /// `wsrep_local_state_comment`.
    pub state_comment: String,
    /// A member of the primary component.
    pub primary: bool,
    /// Write-sets the group ordered that this node has not applied yet.
    pub lag: u64,
    /// How long, in milliseconds, the oldest write-set delivered to this
    /// node has waited for its appliers.
    pub lag_ms: u64,
}

/// The operator's choices (provider options `health.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// A donor or desynced node counts as available (`health.donor_available`).
    pub donor_available: bool,
    /// From this many write-sets behind, the agent check drains a node
    /// (`health.lag_drain`); below it the weight falls with the lag.
    pub lag_drain: u64,
    /// From this many seconds behind, the agent check drains a node too,
    /// and below it the weight falls with the time (`health.lag_drain_seconds`;
    /// 0: time is not looked at). Write-sets are not all alike: a bulk
    /// load's few lag more than many small ones.
    pub lag_drain_seconds: u64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy { donor_available: false, lag_drain: 1000, lag_drain_seconds: 0 }
    }
}

pub const SYNCED: i64 = 4;
pub const DONOR: i64 = 2;
pub const JOINED: i64 = 3;

/// The HTTP check's verdict: `Ok` is 200, `Err` is 503; both carry the line
/// the body says, so an operator running `curl` learns why.
pub fn availability(node: &Snapshot, policy: &Policy) -> Result<String, String> {
    if !node.primary {
        return Err("not in the primary component".into());
    }
    match node.state {
        SYNCED => Ok("synced".into()),
        DONOR if policy.donor_available => Ok(format!("{} (health.donor_available=YES)", node.state_comment)),
        _ => Err(node.state_comment.clone()),
    }
}

/// What the agent tells HAProxy: `down` takes the node out at once,
/// `drain` lets its open sessions finish, `up ready N%` puts it (back) in with
/// a weight that falls with the lag. Every answer that keeps the node in
/// says `ready`, since only the agent can undo a `drain` it sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Agent {
    Down(String),
    Drain(String),
    Up { weight_percent: u64 },
}

pub fn agent(node: &Snapshot, policy: &Policy) -> Agent {
    if !node.primary {
        return Agent::Down("not in the primary component".into());
    }
    let drain_ms = policy.lag_drain_seconds.saturating_mul(1000);
    match availability(node, policy) {
        Ok(_) if node.lag >= policy.lag_drain.max(1) => {
            Agent::Drain(format!("{} write-sets behind (health.lag_drain={})", node.lag, policy.lag_drain))
        }
        Ok(_) if drain_ms > 0 && node.lag_ms >= drain_ms => Agent::Drain(format!(
            "{:.1} s behind (health.lag_drain_seconds={})",
            node.lag_ms as f64 / 1000.0,
            policy.lag_drain_seconds
        )),
        Ok(_) => {
            let by_seconds = if drain_ms > 0 { weight_percent(node.lag_ms, drain_ms) } else { 100 };
            Agent::Up { weight_percent: weight_percent(node.lag, policy.lag_drain).min(by_seconds) }
        }
        // A donor or a joined node catching up still serves its open
        // sessions correctly; only a node without the data is down.
        Err(why) if matches!(node.state, DONOR | JOINED) => Agent::Drain(why),
        Err(why) => Agent::Down(why),
    }
}

/// 100% with no lag, falling in a straight line to 1% at `lag_drain`.
pub fn weight_percent(lag: u64, lag_drain: u64) -> u64 {
    let drain = lag_drain.max(1);
    let lost = (99 * lag.min(drain)) / drain;
    100 - lost
}

impl Agent {
    /// The line HAProxy reads (it stops at the first `\n`; a description
    /// after `#` shows on its stats page).
    pub fn line(&self) -> String {
        match self {
            Agent::Down(why) => format!("down #{}\n", one_line(why)),
            Agent::Drain(why) => format!("up drain #{}\n", one_line(why)),
            Agent::Up { weight_percent } => format!("up ready {weight_percent}%\n"),
        }
    }
}

/// HAProxy reads up to the first `\r` or `\n`: a reason must not end the
/// answer early.
fn one_line(s: &str) -> String {
    s.chars().map(|c| if c == '\r' || c == '\n' { ' ' } else { c }).collect()
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
