//! The leader's window of payloads handed to its Raft core and not yet
//! answered by it.
//!
//! openraft takes a write into a channel of 65,536 messages and answers it
//! once the entry is applied, or with an error once it cannot be (this
//! member no longer leads, or it is handing its leadership over). Nothing
//! slowed a submitter down before that channel was full: a follower
//! forwarding as fast as it could, or a busy leader's own clients, put tens
//! of thousands of payloads in front of the core. The core then fell behind
//! on everything else it does, followers heard no heartbeat within an
//! election timeout, and the election that followed answered every payload
//! still waiting in the channel with an error nobody read: runs of 20,000
//! to 360,000 payloads of the hand-over test vanished that way after a
//! hand-over that itself went well.
//!
//! So the leader lets at most [`MAX_PAYLOADS`] payloads (and
//! [`MAX_BYTES`]) into its core at a time. A submitter waits for room;
//! the one in front reads the oldest batch's answers, the others wait
//! behind it. A caller on its own thread never waits here: it queues
//! instead ([`Window::try_enter`]). Waiting on a leader's forward stops the
//! reading of that follower's connection, and TCP passes the back-pressure
//! on to the follower.
//!
//! Answers are read lazily, by submitters, from the streams
//! `client_write_many` returns: no task and no wake-up per batch. An error
//! in them means the payloads were not ordered here; they are counted
//! ([`Window::lost`]) and logged, as the engine learns of such a loss from
//! its next write-set.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use futures_util::stream::{BoxStream, StreamExt};
use futures_util::FutureExt;
use log::info;
use tokio::sync::{Mutex, MutexGuard};

use crate::raft::types::{AppPayload, GroupRaft, GroupTypes};

/// Payloads in the core at most: far above what the engine ever has in
/// flight (each client waits for its own write-set), far below the core's
/// channel.
pub const MAX_PAYLOADS: usize = 8192;
/// Bytes in the core at most. Into an empty core one batch always goes,
/// however large (a write-set may be up to [`crate::MAX_PAYLOAD_BYTES`]);
/// callers keep batches to [`MAX_PAYLOADS`] payloads.
pub const MAX_BYTES: usize = 64 << 20;

type Answers = BoxStream<'static, Result<openraft::raft::WriteResult<GroupTypes>, openraft::error::Fatal<GroupTypes>>>;

/// One batch in the core: its answers, in submission order.
struct Batch {
    left: usize,
    bytes: usize,
    answers: Answers,
}

#[derive(Default)]
pub struct Window {
    batches: Mutex<VecDeque<Batch>>,
    /// Payloads in the core now (also read without the lock, by tests).
    payloads: AtomicUsize,
    bytes: AtomicUsize,
    /// Payloads the core answered with an error: never ordered here.
    lost: AtomicU64,
    /// The most payloads ever in the core at once.
    peak: AtomicUsize,
    /// When a loss was last logged: one line a second at most.
    logged: std::sync::Mutex<Option<tokio::time::Instant>>,
}

/// Room in the window, held until the batch is in the core: batches enter
/// the core in the order they entered the window.
pub struct Entry<'a> {
    window: &'a Window,
    batches: MutexGuard<'a, VecDeque<Batch>>,
}

impl Window {
    /// Room for a batch of `count` payloads and `bytes`, if there is some
    /// now and nobody waits for it; otherwise the caller queues.
    pub fn try_enter(&self, count: usize, bytes: usize) -> Option<Entry<'_>> {
        let mut batches = self.batches.try_lock().ok()?;
        self.reap(&mut batches);
        self.has_room(count, bytes).then_some(Entry { window: self, batches })
    }

    /// Waits for room for a batch of `count` payloads and `bytes`.
    pub async fn enter(&self, count: usize, bytes: usize) -> Entry<'_> {
        let mut batches = self.batches.lock().await;
        loop {
            self.reap(&mut batches);
            if self.has_room(count, bytes) {
                return Entry { window: self, batches };
            }
            // Not empty, or there would be room. The oldest answer comes
            // first: wait for it, then look again.
            let Some(oldest) = batches.front_mut() else {
                return Entry { window: self, batches };
            };
            let answer = oldest.answers.next().await;
            self.take_answer(&mut batches, answer);
        }
    }

    /// Waits, at most `limit`, for whoever is handing a batch to the core
    /// now. A caller that sets a flag first, and appenders that read it
    /// only once in the window, as [`crate::submit`] does with
    /// `Shared::handing_over`: every appender either finished before this
    /// returns or sees the flag. (One that waits for room here, past the
    /// limit, sees it too: it reads the flag once it has room.)
    pub async fn wait_for_appenders(&self, limit: std::time::Duration) {
        let _ = tokio::time::timeout(limit, self.batches.lock()).await;
    }

    /// Payloads in the core now.
    #[cfg(test)]
    fn payloads(&self) -> usize {
        self.payloads.load(Ordering::Acquire)
    }

    /// The most payloads that were in the core at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Acquire)
    }

    /// Payloads the core did not order (answered with an error).
    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Acquire)
    }

    fn has_room(&self, count: usize, bytes: usize) -> bool {
        let payloads = self.payloads.load(Ordering::Acquire);
        payloads == 0
            || (payloads.saturating_add(count) <= MAX_PAYLOADS
                && self.bytes.load(Ordering::Acquire).saturating_add(bytes) <= MAX_BYTES)
    }

    /// Takes every answer already there, oldest batch first, without waiting.
    fn reap(&self, batches: &mut VecDeque<Batch>) {
        while let Some(oldest) = batches.front_mut() {
            // Unconstrained: inside a task, tokio's budget would call a
            // ready answer pending after a hundred or so.
            let Some(answer) = tokio::task::unconstrained(oldest.answers.next()).now_or_never() else {
                return; // the oldest is still in the core; so are the rest
            };
            self.take_answer(batches, answer);
        }
    }

    /// Counts one answer of the oldest batch (`None`: it has no more).
    fn take_answer(
        &self,
        batches: &mut VecDeque<Batch>,
        answer: Option<Result<openraft::raft::WriteResult<GroupTypes>, openraft::error::Fatal<GroupTypes>>>,
    ) {
        let Some(oldest) = batches.front_mut() else {
            return;
        };
        let done = match answer {
            Some(Ok(Ok(_))) => 1,
            Some(Ok(Err(e))) => {
                self.note_lost(1, &e.to_string());
                1
            }
            // The core stopped: nothing more will be answered.
            Some(Err(e)) => {
                self.note_lost(oldest.left, &e.to_string());
                oldest.left
            }
            None => oldest.left,
        };
        oldest.left -= done;
        self.payloads.fetch_sub(done, Ordering::AcqRel);
        if oldest.left == 0 {
            self.bytes.fetch_sub(oldest.bytes, Ordering::AcqRel);
            batches.pop_front();
        }
    }

    fn note_lost(&self, count: usize, why: &str) {
        let total = self.lost.fetch_add(count as u64, Ordering::AcqRel) + count as u64;
        let mut logged = crate::sync::lock(&self.logged);
        if logged.is_none_or(|at| at.elapsed() >= std::time::Duration::from_secs(1)) {
            *logged = Some(tokio::time::Instant::now());
            info!(
                "Submitted payloads not ordered by this member's Raft core: {why} \
                 ({total} since start; their senders learn of it from their next one)"
            );
        }
    }
}

impl Entry<'_> {
    /// Hands `batch` to the core. Its answers are read later, by whoever
    /// needs room.
    pub async fn append(self, raft: &GroupRaft, batch: Vec<AppPayload>) {
        let count = batch.len();
        let bytes: usize = batch.iter().map(|p| p.bytes.0.len()).sum();
        match raft.client_write_many(batch).await {
            Ok(answers) => self.push(count, bytes, answers),
            Err(e) => self.window.note_lost(count, &e.to_string()),
        }
    }

    /// Counts a batch of `count` payloads and `bytes` in the core, with the
    /// stream of its answers.
    fn push(mut self, count: usize, bytes: usize, answers: Answers) {
        let window = self.window;
        let now = window.payloads.fetch_add(count, Ordering::AcqRel) + count;
        window.bytes.fetch_add(bytes, Ordering::AcqRel);
        window.peak.fetch_max(now, Ordering::AcqRel);
        self.batches.push_back(Batch { left: count, bytes, answers });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::error::{ClientWriteError, ForwardToLeader};
    use std::sync::Arc;
    use tokio::sync::oneshot;

    type Answer = Result<openraft::raft::WriteResult<GroupTypes>, openraft::error::Fatal<GroupTypes>>;

    /// A batch's answers as the core gives them: one per payload, in order,
    /// each when the test sends it.
    fn answers(count: usize) -> (Answers, Vec<oneshot::Sender<Answer>>) {
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..count).map(|_| oneshot::channel()).unzip();
        let stream = futures_util::stream::iter(receivers)
            .then(|rx| async move { rx.await.unwrap_or(Err(openraft::error::Fatal::Stopped)) });
        (stream.boxed(), senders)
    }

    fn not_leader() -> Answer {
        Ok(Err(ClientWriteError::ForwardToLeader(ForwardToLeader::empty())))
    }

    fn applied() -> Answer {
        let leader = openraft::impls::leader_id_adv::LeaderId { term: 1, node_id: 1 };
        Ok(Ok(openraft::raft::WriteResponse { log_id: openraft::LogId::new(leader, 1), response: () }))
    }

    /// Fills the window with `batches` batches of `each` payloads; gives
    /// their answer senders.
    fn fill(window: &Window, batches: usize, each: usize) -> Vec<Vec<oneshot::Sender<Answer>>> {
        (0..batches)
            .map(|_| {
                let (stream, senders) = answers(each);
                window.try_enter(each, each).expect("room").push(each, each, stream);
                senders
            })
            .collect()
    }

    #[test]
    fn a_full_window_lets_nothing_in_until_the_oldest_answers() {
        let window = Window::default();
        let mut senders = fill(&window, MAX_PAYLOADS / 64, 64);
        assert_eq!(window.payloads(), MAX_PAYLOADS);
        assert!(window.try_enter(1, 1).is_none(), "full");
        // A later batch's answers do not make room while the oldest waits:
        // the core answers in order, so they cannot come first anyway.
        for tx in senders.pop().expect("a batch") {
            let _ = tx.send(applied());
        }
        assert!(window.try_enter(1, 1).is_none(), "still full: the oldest is unanswered");
        let oldest = senders.remove(0);
        let mut oldest = oldest.into_iter();
        let _ = oldest.next().expect("one").send(applied());
        assert!(window.try_enter(1, 1).is_some(), "one answer, one payload's room");
        assert_eq!(window.payloads(), MAX_PAYLOADS - 1);
        assert_eq!(window.lost(), 0);
        assert_eq!(window.peak(), MAX_PAYLOADS);
    }

    #[test]
    fn an_empty_window_takes_one_batch_however_large() {
        let window = Window::default();
        let (stream, _senders) = answers(1);
        window.try_enter(1, MAX_BYTES * 2).expect("empty: room").push(1, MAX_BYTES * 2, stream);
        assert!(window.try_enter(1, 1).is_none(), "over the bytes");
    }

    #[test]
    fn payloads_the_core_refused_are_counted_lost_and_make_room() {
        let window = Window::default();
        let mut senders = fill(&window, 2, 3);
        for tx in senders.remove(0) {
            let _ = tx.send(not_leader());
        }
        // The second batch: its core stopped (its answers dropped).
        senders.clear();
        assert!(window.try_enter(1, 1).is_some());
        assert_eq!(window.payloads(), 0);
        assert_eq!(window.lost(), 6);
    }

    /// A submitter waiting for room gets it once the oldest answers, and
    /// meanwhile holds the window: a caller on its own thread queues.
    #[tokio::test]
    async fn a_waiting_submitter_gets_room_when_the_oldest_answers() {
        let window = Arc::new(Window::default());
        let mut senders = fill(&window, 1, MAX_PAYLOADS);
        let waiter = {
            let window = window.clone();
            tokio::spawn(async move {
                let entry = window.enter(1, 1).await;
                let (stream, senders) = answers(1);
                entry.push(1, 1, stream);
                senders
            })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "waits while full");
        assert!(window.try_enter(1, 1).is_none(), "a waiter holds the window");
        for tx in senders.remove(0) {
            let _ = tx.send(applied());
        }
        let _unanswered = waiter.await.expect("the waiter got room");
        // The answers it did not need are read by the next one in.
        assert!(window.try_enter(1, 1).is_some());
        assert_eq!(window.payloads(), 1, "only the waiter's batch is left in the core");
        assert_eq!(window.lost(), 0);
    }

    /// The hand-over's rule: a flag set before `wait_for_appenders` is seen
    /// by every appender that enters after it returns.
    #[tokio::test]
    async fn wait_for_appenders_waits_for_the_one_inside() {
        let window = Arc::new(Window::default());
        let entry = window.try_enter(1, 1).expect("room");
        let waited = {
            let window = window.clone();
            tokio::spawn(async move { window.wait_for_appenders(std::time::Duration::from_secs(60)).await })
        };
        tokio::task::yield_now().await;
        assert!(!waited.is_finished(), "an appender is inside");
        drop(entry);
        waited.await.expect("done once it left");
    }
}
