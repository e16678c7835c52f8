//! The donor's side of a catch-up: what this member's log holds for a
//! member catching up at its start, and the entries it asks for, batch by
//! batch. Each read is a request of its own; `Donations` remembers, per
//! member, where its catch-up started, so that the donor logs it as an IST
//! sender does: once at the start, its progress every few seconds, and the
//! end.

use std::collections::BTreeMap;
use std::sync::Mutex;

use log::{debug, info};
use tokio::time::Instant;

use super::PROGRESS_EVERY;
use crate::shared::Shared;
use crate::wire::Response;
use crate::MemberId;

/// The catch-ups this member is serving, by the member catching up.
#[derive(Default)]
pub struct Donations {
    by_member: Mutex<BTreeMap<MemberId, Donation>>,
}

/// One member's catch-up from this log, as far as it went.
#[derive(Debug)]
struct Donation {
    /// The first index sent (the one after the joiner's last entry).
    first: u64,
    /// The next index the joiner will ask for when it goes on.
    next: u64,
    entries: u64,
    bytes: u64,
    started: Instant,
    said: Instant,
}

/// Donor side of `Request::LogRange`.
pub fn handle_range(shared: &Shared, from: MemberId) -> Response {
    let (first, committed) = shared.log.committed_range();
    info!(
        "Member {from} asks which log entries this member holds: {}-{} (a member catching up at its start)",
        first.unwrap_or(0),
        committed.map_or(0, |c| c.index)
    );
    Response::LogRange { name: shared.config.me.name.clone(), first, committed, leads: shared.raft().is_leader() }
}

/// Donor side of `Request::ReadLog`: entries from index `from` on (the
/// joiner's last entry, which it checks against its own, then what follows).
pub fn handle_read(shared: &Shared, member: MemberId, from: u64, max_bytes: u64) -> Response {
    match shared.log.committed_entries(from, max_bytes.min(crate::wire::BULK_FRAME_BYTES as u64) as usize) {
        Ok((entries, committed)) => {
            debug!("Sending {} log entries from index {from} to member {member} (catch-up)", entries.len());
            if !entries.is_empty() {
                // The first is the joiner's own last entry, sent back for its match check.
                let bytes = entries.iter().skip(1).map(|e| e.len() as u64).sum();
                let sent_to = from + entries.len() as u64 - 1;
                shared.donations.sent(member, from, sent_to, bytes, committed.map_or(0, |c| c.index));
            }
            Response::Entries { entries, committed }
        }
        Err(e) => Response::Failed { reason: format!("cannot read the log from index {from}: {e}") },
    }
}

impl Donations {
    /// Entries `from..=sent_to` (`bytes` of them) went to `member`, whose
    /// catch-up ends at `committed`. A read that does not go on from where
    /// the last one ended starts a new catch-up.
    fn sent(&self, member: MemberId, from: u64, sent_to: u64, bytes: u64, committed: u64) {
        let now = Instant::now();
        let mut by_member = crate::sync::lock(&self.by_member);
        let going_on = by_member.get(&member).is_some_and(|d| d.next == from);
        if !going_on {
            info!(
                "Serving the group log to member {member} (an IST from this member's log): log indexes {}-{committed}",
                from + 1
            );
            let fresh = Donation { first: from + 1, next: from, entries: 0, bytes: 0, started: now, said: now };
            by_member.insert(member, fresh);
        }
        let Some(d) = by_member.get_mut(&member) else { return };
        // The first entry of each batch is the joiner's own last one, resent for the match check.
        d.entries += sent_to.saturating_sub(from);
        d.bytes += bytes;
        d.next = sent_to;
        if sent_to >= committed {
            info!(
                "Served the group log to member {member}: log indexes {}-{sent_to}, {} entries, {} bytes in {:.1?}",
                d.first,
                d.entries,
                d.bytes,
                d.started.elapsed()
            );
            by_member.remove(&member);
        } else if now.duration_since(d.said) >= PROGRESS_EVERY {
            d.said = now;
            let percent = 100 * (sent_to + 1 - d.first) / (committed + 1 - d.first).max(1);
            info!(
                "Serving the group log to member {member}: {percent}% sent, log index {sent_to} of {}-{committed}",
                d.first
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(d: &Donations, member: MemberId) -> Option<(u64, u64, u64, u64)> {
        let by_member = d.by_member.lock().unwrap();
        by_member.get(&member).map(|d| (d.first, d.next, d.entries, d.bytes))
    }

    /// Batches that go on from one another add up to one catch-up (the
    /// joiner's own last entry, resent at the head of each, not counted);
    /// a read from elsewhere starts a new one; the last batch ends it.
    #[tokio::test(start_paused = true)]
    async fn a_donation_counts_its_batches_and_ends_at_the_commit() {
        let d = Donations::default();
        d.sent(7, 100, 150, 5_000, 300);
        assert_eq!(state(&d, 7), Some((101, 150, 50, 5_000)));
        d.sent(7, 150, 220, 7_000, 300);
        assert_eq!(state(&d, 7), Some((101, 220, 120, 12_000)));
        d.sent(8, 10, 20, 100, 300);
        assert_eq!(state(&d, 7), Some((101, 220, 120, 12_000)), "another member's catch-up is its own");
        d.sent(7, 101, 130, 3_000, 300);
        assert_eq!(state(&d, 7), Some((102, 130, 29, 3_000)), "a read from elsewhere starts again");
        d.sent(7, 130, 300, 17_000, 300);
        assert_eq!(state(&d, 7), None, "served: the commit index reached");
        assert_eq!(state(&d, 8), Some((11, 20, 10, 100)));
    }
}
