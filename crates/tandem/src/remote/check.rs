//! `tandem node check`: whether a node should take client traffic, for
//! scripts that only see an exit status (keepalived's `vrrp_script`, a
//! load balancer's external check, a cron job).
//!
//! The rule is the provider's own `/health` rule
//! ([`tandem_health::policy::availability`]), fed from what the node shows
//! over SQL, so the script and the HTTP check never disagree about a node.
//! Two of clustercheck's options are added on top: a donor may count
//! (`--available-when-donor`, also taken from the node's own
//! `health.donor_available`), and a `read_only` node may be taken out
//! (`--unavailable-when-readonly`, clustercheck's
//! `AVAILABLE_WHEN_READONLY=0`), for a script that decides where the writes
//! go. Without it `read_only` does not count, as for `/health` and
//! clustercheck's default.

use super::{Endpoint, Login};
use crate::cluster::mysql;
use anyhow::Result;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use tandem_health::policy::{availability, Policy, Snapshot};

/// Exit status: the node should take traffic.
pub const AVAILABLE: u8 = 0;
/// Exit status: it should not (the reason is printed).
pub const NOT_AVAILABLE: u8 = 1;
/// Exit status: no answer to decide on (no connection, a status missing).
pub const CANNOT_TELL: u8 = 2;

/// Every status the rule looks at, and the two variables beside them, in
/// one round trip.
const QUERY: &str = "SHOW GLOBAL STATUS LIKE 'wsrep%'; \
    SHOW GLOBAL VARIABLES WHERE Variable_name IN ('read_only', 'wsrep_provider_options')";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckOptions {
    /// clustercheck's `AVAILABLE_WHEN_DONOR`.
    pub available_when_donor: bool,
    /// clustercheck's `AVAILABLE_WHEN_READONLY=0`.
    pub unavailable_when_readonly: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Take traffic; why (the `/health` body's reason).
    Available(String),
    /// Do not; why.
    NotAvailable(String),
}

impl Verdict {
    pub fn exit_status(&self) -> u8 {
        match self {
            Verdict::Available(_) => AVAILABLE,
            Verdict::NotAvailable(_) => NOT_AVAILABLE,
        }
    }
}

/// The node's `wsrep%` status with `read_only` and `wsrep_provider_options`.
pub fn read(client: &Path, at: &Endpoint, login: &Login, timeout: Duration) -> Result<BTreeMap<String, String>> {
    let mut args = at.client_args();
    if let Some(user) = &login.user {
        args.push(format!("--user={user}"));
    }
    // The caller names the node on the line it prints.
    let rows = mysql::query_with(client, &args, login.password.as_deref(), QUERY, timeout)?;
    Ok(mysql::parse_status(&rows))
}

/// The verdict on what [`read`] returned; `Err` when it cannot tell (a
/// status the rule needs is missing or not a number).
pub fn decide(shown: &BTreeMap<String, String>, options: &CheckOptions) -> Result<Verdict, String> {
    if super::readiness(shown) == super::Readiness::NotReplicating {
        return Ok(Verdict::NotAvailable("no wsrep provider loaded: not a cluster node".into()));
    }
    let get = |k: &str| shown.get(k).ok_or_else(|| format!("the node shows no {k}"));
    let state = get("wsrep_local_state")?;
    let state: i64 = state.parse().map_err(|_| format!("wsrep_local_state is {state:?}, not a number"))?;
    let node = Snapshot {
        state,
        state_comment: get("wsrep_local_state_comment")?.clone(),
        primary: get("wsrep_cluster_status")? == "Primary",
        // availability() does not look at the lag; the agent check does.
        lag: 0,
        lag_ms: 0,
    };
    let policy =
        Policy { donor_available: options.available_when_donor || node_counts_donors(shown), ..Policy::default() };
    let why = match availability(&node, &policy) {
        Ok(why) => why,
        Err(why) => return Ok(Verdict::NotAvailable(why)),
    };
    let read_only = get("read_only")?;
    if options.unavailable_when_readonly && tandem_engine::options::parse_bool(read_only) != Some(false) {
        return Ok(Verdict::NotAvailable(format!("{why}, but read_only={read_only} (--unavailable-when-readonly)")));
    }
    Ok(Verdict::Available(why))
}

/// The node's own `health.donor_available`, so that a node whose `/health`
/// counts donors passes this check too.
fn node_counts_donors(shown: &BTreeMap<String, String>) -> bool {
    let options = shown.get("wsrep_provider_options").map(String::as_str).unwrap_or("");
    options
        .split(';')
        .filter_map(|item| item.split_once('='))
        .find(|(key, _)| key.trim() == "health.donor_available")
        .and_then(|(_, value)| tandem_engine::options::parse_bool(value.trim()))
        .unwrap_or(false)
}

// Tested in crates/tandem/tests/node_check.rs, outside the shipped lines.
