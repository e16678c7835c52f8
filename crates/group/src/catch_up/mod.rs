//! A restarting member catches its log up from any member that still holds
//! what it missed, before its Raft starts (issue 48: PXC's freeze-the-donor
//! procedure, and a designated donor with a larger `gcache.size`).
//!
//! Raft's leader sends a follower what follows its log, but only from the
//! leader's own log: once the leader purged past the follower's last entry
//! it sends a snapshot of the group state instead, and the engine, whose
//! data cannot be rebuilt from that, asks for a full state transfer. Yet a
//! follower's log is a copy of the leader's up to its commit index (Raft's
//! log matching), so the committed entries of *any* member are the entries
//! the leader would have sent. So a member restarted with its durable state:
//! 1. asks every configured peer which committed entries it holds
//!    (`Request::LogRange`);
//! 2. picks one holding what follows its own last entry, in the order
//!    `wsrep_sst_donor` gives (names, a trailing comma for any other
//!    member), else any member but the leader, the leader last: when the
//!    leader is the one, nothing is fetched, as its Raft sends it anyway;
//! 3. reads the entries in batches (`Request::ReadLog`), from its own last
//!    entry on (which must match the donor's: same index and term, or the
//!    logs differ and the leader sorts that out), and appends them to its
//!    log as committed, fsynced;
//! 4. starts Raft, which replays them into the replica like its own
//!    committed log; the leader sends only what follows.
//!
//! A donor that fails or dies mid-way leaves a valid prefix: the member goes
//! on from there with the next candidate, and without one, with what the
//! leader can give (the state transfer the engine then asks for says why).
//! A peer of an older build does not know the requests and counts as one
//! that holds nothing. The donor's side is `donor`.

mod donor;

pub use donor::{handle_range, handle_read, Donations};

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use futures_util::future::join_all;
use log::{debug, info, warn};

use crate::raft::types::{Entry, LogId};
use crate::store::decode_entry;
use crate::store::log_store::DurableLog;
use crate::transport::{CallError, NetCtx};
use crate::wire::{Request, Response};
use crate::{GroupConfig, MemberId};

/// How long a peer may take to say what it holds.
const RANGE_WAIT: Duration = Duration::from_secs(2);
/// How long one batch may take to arrive.
const BATCH_WAIT: Duration = Duration::from_secs(10);
/// How often a long catch-up logs its progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// What a peer said it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Holder {
    pub addr: String,
    pub member: MemberId,
    pub name: String,
    pub first: Option<u64>,
    pub committed: Option<LogId>,
    pub leads: bool,
}

impl Holder {
    /// Holds the entry at `last` (to check the logs match there) and
    /// committed entries after it.
    fn covers(&self, last: u64) -> bool {
        self.first.is_some_and(|f| f <= last) && self.committed.is_some_and(|c| c.index > last)
    }
}

/// Catches this member's log up from a member that holds what follows it,
/// if one other than the leader does; Raft brings the rest.
pub async fn from_any_member(config: &GroupConfig, net: &Arc<NetCtx>, log: &DurableLog) {
    let Some(mut last) = log.vote_and_last().1 else {
        return;
    };
    let peers = crate::join::configured_peers(config, "");
    let asked = join_all(peers.iter().map(|addr| ask_range(net, addr))).await;
    let holders: Vec<Holder> = asked.into_iter().flatten().collect();
    say_which_named_lack(&config.donors, &holders, last.index);
    let order = candidates(&config.donors, &holders, last.index);
    if order.is_empty() {
        say_why_none(&config.donors, &holders, last.index);
    }
    for holder in order {
        match fetch_from(net, log, holder, last, config.log.catch_up_batch_bytes).await {
            Ok(reached) => {
                last = reached;
                if holder.committed.is_some_and(|c| c.index <= last.index) {
                    break;
                }
            }
            Err((reached, why)) => {
                last = reached;
                warn!(
                    "Catching up from member {} ({}) stopped at log index {}: {why}; trying the next one",
                    holder.member, holder.name, last.index
                );
            }
        }
    }
}

/// Who to fetch from, best first: the members `spec` names
/// (`wsrep_sst_donor`, in its order), then, when it is empty or ends with
/// a comma, any other; each only if it holds what follows `last`. The
/// leader ends the list: its Raft sends the rest anyway, so nothing is
/// fetched from it or from anyone after it.
pub fn candidates<'a>(spec: &str, holders: &'a [Holder], last: u64) -> Vec<&'a Holder> {
    let names: Vec<&str> = spec.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let any_other = names.is_empty() || spec.trim_end().ends_with(',');
    let mut order: Vec<&Holder> = names.iter().filter_map(|n| holders.iter().find(|h| h.name == *n)).collect();
    if any_other {
        let mut rest: Vec<&Holder> = holders.iter().filter(|h| !order.contains(h)).collect();
        rest.sort_by_key(|h| h.leads);
        order.extend(rest);
    }
    let mut out = Vec::new();
    for h in order.into_iter().filter(|h| h.covers(last)) {
        if h.leads {
            break;
        }
        out.push(h);
    }
    out
}

/// The members `wsrep_sst_donor` names that cannot serve: each is said,
/// with why, as the catch-up goes on with the next candidate.
fn say_which_named_lack(spec: &str, holders: &[Holder], last: u64) {
    for name in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let why = match holders.iter().find(|h| h.name == name) {
            None => "did not say what it holds (down, unknown, or of an earlier build)".to_string(),
            Some(h) if h.covers(last) => continue,
            Some(h) => format!(
                "holds committed log indexes {}-{} only",
                h.first.map_or_else(|| "none".into(), |f| f.to_string()),
                h.committed.map_or(0, |c| c.index)
            ),
        };
        info!(
            "wsrep_sst_donor names {name}, which {why}; this member needs log index {last} and what follows: \
             going on with the next candidate"
        );
    }
}

/// Why nothing is fetched: nothing newer was committed, or the leader holds
/// what follows (its Raft sends it): the usual cases, a debug line. Or no
/// member that answered holds what follows, so
/// that the leader sends a snapshot of the group state and the data needs a
/// state transfer (said, with who holds what).
fn say_why_none(spec: &str, holders: &[Holder], last: u64) {
    let newer = holders.iter().any(|h| h.committed.is_some_and(|c| c.index > last));
    if !newer || holders.iter().any(|h| h.leads && h.covers(last)) {
        debug!("Catch-up: nothing to fetch after log index {last} from a member other than the leader");
        return;
    }
    let held: Vec<String> = holders
        .iter()
        .map(|h| format!("{} from {}", h.name, h.first.map_or_else(|| "nothing".into(), |f| f.to_string())))
        .collect();
    let named = if spec.trim().is_empty() { String::new() } else { format!(" (wsrep_sst_donor '{spec}')") };
    info!(
        "No member{named} holds the group log after this member's last index {last}: {}; it will need a state \
         transfer unless the leader still can send the rest",
        held.join(", ")
    );
}

async fn ask_range(net: &NetCtx, addr: &str) -> Option<Holder> {
    match net.call(addr, None, &Request::LogRange, RANGE_WAIT).await {
        Ok((member, Response::LogRange { name, first, committed, leads })) => {
            Some(Holder { addr: addr.to_string(), member, name, first, committed, leads })
        }
        Ok((_, other)) => {
            debug!("Catch-up: {addr} did not say what it holds: {other:?}");
            None
        }
        Err(e) => {
            debug!("Catch-up: {addr} did not say what it holds: {e}");
            None
        }
    }
}

/// Fetches from `holder` what follows `last`, appending batch by batch.
/// Returns how far the log got, with why it stopped early if it did.
async fn fetch_from(
    net: &Arc<NetCtx>,
    log: &DurableLog,
    holder: &Holder,
    mut last: LogId,
    batch_bytes: u64,
) -> Result<LogId, (LogId, String)> {
    let (from, started) = (last.index, Instant::now());
    // When progress was last logged: at the first batch, then every PROGRESS_EVERY.
    let (mut entries, mut bytes, mut said) = (0u64, 0u64, None::<Instant>);
    info!(
        "Catching up the group log from member {} ({}) at {}: from log index {} to {}",
        holder.member,
        holder.name,
        holder.addr,
        from + 1,
        holder.committed.map_or(0, |c| c.index)
    );
    let mut next = Some(ReadAhead::ask(net, holder, last.index, batch_bytes));
    while let Some(asked) = next.take() {
        let (batch, committed) = asked.batch().await.map_err(|why| (last, why))?;
        // The first entry is this member's own last one, sent back for the match check.
        let got: u64 = batch.iter().skip(1).map(|b| b.len() as u64).sum();
        let appended = follow_on(last, &batch).map_err(|why| (last, why))?;
        let Some(reached) = appended.last().map(|e| e.log_id) else {
            break;
        };
        if committed.is_some_and(|c| c.index > reached.index) {
            next = Some(ReadAhead::ask(net, holder, reached.index, batch_bytes));
        }
        debug!("Catch-up: appending log indexes {}-{} from member {}", last.index + 1, reached.index, holder.member);
        entries += appended.len() as u64;
        bytes += got;
        crate::sync::blocking_section(|| log.append_caught_up(appended))
            .map_err(|e| (last, format!("this member's log could not take them: {e}")))?;
        last = reached;
        if said.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY) {
            said = Some(Instant::now());
            info!(
                "Catching up the group log from member {} ({}): at log index {} of {}",
                holder.member,
                holder.name,
                last.index,
                committed.map_or(0, |c| c.index)
            );
        }
    }
    info!(
        "Caught up the group log from member {} ({}): log indexes {}-{}, {entries} entries, {bytes} bytes in {:.1?}",
        holder.member,
        holder.name,
        from + 1,
        last.index,
        started.elapsed()
    );
    Ok(last)
}

/// A batch asked for before the one before it is appended: the donor
/// reads and sends it while this member fsyncs that one. Dropped (the
/// catch-up stopped), it cancels the read.
struct ReadAhead(tokio::task::JoinHandle<Result<(MemberId, Response), CallError>>);

impl ReadAhead {
    fn ask(net: &Arc<NetCtx>, holder: &Holder, from: u64, max_bytes: u64) -> ReadAhead {
        let (net, addr, member) = (net.clone(), holder.addr.clone(), holder.member);
        let req = Request::ReadLog { from, max_bytes };
        ReadAhead(tokio::spawn(async move { net.call(&addr, Some(member), &req, BATCH_WAIT).await }))
    }

    /// The entries (encoded) and how far the donor's log is committed.
    async fn batch(mut self) -> Result<(Vec<Vec<u8>>, Option<LogId>), String> {
        match (&mut self.0).await {
            Ok(Ok((_, Response::Entries { entries, committed }))) => Ok((entries, committed)),
            Ok(Ok((_, other))) => Err(format!("it answered {other:?}")),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(format!("the read ended: {e}")),
        }
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The entries of `batch` that follow `last`, checked: the first must be
/// `last` itself (the logs match up to there), the others one index after
/// another.
fn follow_on(last: LogId, batch: &[Vec<u8>]) -> Result<Vec<Entry>, String> {
    let decoded: Vec<Entry> = batch.iter().map(|b| decode_entry(b)).collect::<Result<_, _>>()?;
    let Some(first) = decoded.first() else {
        return Err(format!("it no longer holds log index {}", last.index));
    };
    if first.log_id != last {
        return Err(format!(
            "its entry at log index {} is of term {}, this member's of term {}: the logs differ there",
            last.index, first.log_id.leader_id.term, last.leader_id.term
        ));
    }
    let rest: Vec<Entry> = decoded.into_iter().skip(1).collect();
    for (expected, e) in (last.index + 1..).zip(&rest) {
        if e.log_id.index != expected {
            return Err(format!("its entries skip from log index {} to {}", expected - 1, e.log_id.index));
        }
    }
    Ok(rest)
}

#[cfg(test)]
mod tests {
    use openraft::EntryPayload;

    use super::*;
    use crate::raft::types::{AppPayload, Bytes};
    use crate::store::encode_entry;

    fn log_id(term: u64, index: u64) -> LogId {
        LogId::new(openraft::impls::leader_id_adv::LeaderId { term, node_id: 1 }, index)
    }

    fn entry(term: u64, index: u64) -> Vec<u8> {
        let payload = AppPayload { origin: 1, bytes: Bytes::from(vec![index as u8; 8]) };
        encode_entry(&Entry { log_id: log_id(term, index), payload: EntryPayload::Normal(payload) })
    }

    /// n1 leads and holds from 500; n2 from 10, n3 from 200: committed to 900.
    fn holders() -> Vec<Holder> {
        let h = |name: &str, first, leads| Holder {
            addr: format!("{name}:4567"),
            member: 1,
            name: name.into(),
            first: Some(first),
            committed: Some(log_id(3, 900)),
            leads,
        };
        vec![h("n1", 500, true), h("n2", 10, false), h("n3", 200, false)]
    }

    fn names(order: Vec<&Holder>) -> Vec<&str> {
        order.into_iter().map(|h| h.name.as_str()).collect()
    }

    #[test]
    fn any_member_but_the_leader_that_holds_the_gap_in_address_order() {
        let all = holders();
        assert_eq!(names(candidates("", &all, 300)), ["n2", "n3"]);
        assert_eq!(names(candidates("", &all, 100)), ["n2"], "n3 no longer holds index 100");
        // The leader holds it: its Raft sends it, so nobody after it is asked.
        assert_eq!(names(candidates("n1,", &all, 600)), Vec::<&str>::new());
        assert_eq!(names(candidates("", &all, 900)), Vec::<&str>::new(), "nothing committed after 900");
    }

    #[test]
    fn wsrep_sst_donor_names_come_first_and_without_a_trailing_comma_alone() {
        let all = holders();
        assert_eq!(names(candidates("n3", &all, 300)), ["n3"]);
        assert_eq!(names(candidates("n3,", &all, 300)), ["n3", "n2"]);
        assert_eq!(names(candidates("n3, n2", &all, 300)), ["n3", "n2"]);
        assert_eq!(names(candidates("n3", &all, 100)), Vec::<&str>::new(), "the named donor lacks index 100");
        assert_eq!(names(candidates("n3,", &all, 100)), ["n2"], "then any other that holds it");
        assert_eq!(names(candidates("nobody", &all, 300)), Vec::<&str>::new());
    }

    #[test]
    fn a_batch_must_start_at_our_last_entry_and_go_on_without_a_gap() {
        let last = log_id(2, 40);
        let batch: Vec<Vec<u8>> = vec![entry(2, 40), entry(3, 41), entry(3, 42)];
        let rest = follow_on(last, &batch).expect("follows on");
        assert_eq!(rest.iter().map(|e| e.log_id.index).collect::<Vec<_>>(), [41, 42]);
        assert_eq!(follow_on(last, &[entry(2, 40)]).unwrap().len(), 0, "nothing after ours");
        let differs = follow_on(last, &[entry(1, 40), entry(3, 41)]).unwrap_err();
        assert!(differs.contains("the logs differ"), "{differs}");
        let gap = follow_on(last, &[entry(2, 40), entry(3, 42)]).unwrap_err();
        assert!(gap.contains("skip from log index 40 to 42"), "{gap}");
        let purged = follow_on(last, &[]).unwrap_err();
        assert!(purged.contains("no longer holds log index 40"), "{purged}");
    }
}
