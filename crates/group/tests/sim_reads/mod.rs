//! Causal reads in the simulation. A reader on a member asks for a read
//! barrier (`HostedMember::read_barrier`, the group's part of a read with
//! `wsrep_sync_wait`) again and again. Before each, it notes the newest of
//! each writer's payloads that the writer's own member applied: what the
//! engine there has acknowledged to its client. Once the barrier returns,
//! the reader's member must have applied those payloads too, or a client
//! could read there from before a commit it was already told of.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tandem_group::HostedMember;

use super::common::{Event, Recording};

/// What a reader did, for the checks at the end of a run.
#[derive(Default)]
pub struct Reader {
    /// Barriers that returned and were checked.
    pub reads: AtomicUsize,
    /// The first read that missed an acknowledged payload.
    pub stale: Mutex<Option<String>>,
}

impl Reader {
    /// Fails the run if a read was stale, or if none returned at all (a
    /// check that never ran proves nothing).
    pub fn check(&self, seed: u64, host: &str) {
        if let Some(stale) = self.stale.lock().unwrap().as_ref() {
            panic!("seed {seed}: a causal read on {host} was stale: {stale}");
        }
        let reads = self.reads.load(Ordering::SeqCst);
        assert!(reads > 0, "seed {seed}: no causal read on {host} returned");
        eprintln!("seed {seed}: {reads} causal reads on {host} returned, none stale");
    }
}

/// The newest of writer `w`'s payloads (`w:n`) that `rec` applied.
fn newest_from_writer(rec: &Recording, w: usize) -> Option<Vec<u8>> {
    let prefix = format!("{w}:").into_bytes();
    rec.journal().events.iter().rev().find_map(|e| match e {
        Event::Message { payload, .. } if payload.starts_with(&prefix) => Some(payload.clone()),
        _ => None,
    })
}

/// Reads on `member` (whose replica journals into `rec`) every 20 ms of
/// simulated time, checking each read against what each writer's member
/// had applied when the read began (`writers_recs`: writer w's member's
/// journal at index w).
pub async fn read(
    host: &'static str,
    member: Arc<HostedMember>,
    rec: Recording,
    writers_recs: impl Fn() -> Vec<Recording>,
    reader: Arc<Reader>,
) {
    loop {
        let acked: Vec<Vec<u8>> =
            writers_recs().iter().enumerate().filter_map(|(w, r)| newest_from_writer(r, w)).collect();
        // Refusals (not primary, no leader yet) are a read's error to its
        // client, not a stale read; only a barrier that returned is checked.
        if member.read_barrier(Duration::from_secs(2)).await.is_ok() {
            if let Some(missed) = acked.iter().find(|p| !rec.has_message(p)) {
                let mut stale = reader.stale.lock().unwrap();
                stale.get_or_insert_with(|| {
                    format!(
                        "the writer's member had applied {} before the read began; {host} had not when it returned",
                        String::from_utf8_lossy(missed)
                    )
                });
            }
            reader.reads.fetch_add(1, Ordering::SeqCst);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
