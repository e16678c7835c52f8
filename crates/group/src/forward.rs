//! A follower's payloads on their way to the leader.
//!
//! A follower writes what its members submit to one connection of its own
//! to the leader, frame after frame, without waiting for answers. The leader
//! reads a connection's requests one at a time, so the payloads reach its
//! log in the order they were written, and a batch need not wait for the
//! one before it to be answered. A caller that finds the link up and
//! nothing queued before it writes its payload itself, on its own thread:
//! no group worker is woken to send it, and none to read an answer.
//!
//! The leader answers only what it did not take. A member that no longer
//! leads hands the payloads back (`Returned`), and so does a leader handing
//! its leadership over, once what it already took is in its Raft core
//! ([`crate::in_core::Window::wait_for_appenders`]), and a leader whose
//! group no longer has the follower. A connection that handed some back
//! hands back every later frame too (`transport::server`), so that nothing
//! written after them is ordered before them. They go to the next
//! leader ahead of anything newer, so a leader change does not lose what
//! reached a live member. A follower waits for everything a former leader
//! hands back for as long as it keeps handing back
//! ([`close`]); the leader, before it goes, waits for the followers it
//! handed payloads back to to close their connections
//! ([`Forwarder::wait_closed`]).
//!
//! A payload written to a connection that then breaks may or may not have
//! been appended: it is never sent again (a duplicate would be ordered
//! twice); the engine learns of the loss from its next payload.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use log::{debug, info, warn};
use tokio::io::{AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::runtime::Handle;
use tokio::sync::{Mutex, MutexGuard};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::forward_watch::Watch;
use crate::injected::{self, Defect};
use crate::raft::types::AppPayload;
use crate::shared::Shared;
use crate::sync::lock;
use crate::transport::tls::PeerStream;
use crate::transport::{Held, OwnLink};
use crate::wire::{self, Request, Response};
use crate::{GroupError, MemberId};

/// Payloads in frames, oldest first: a frame handed back is sent again as
/// it was, so it never outgrows the frame it came in.
pub type Frames = Vec<Vec<AppPayload>>;

#[derive(Default)]
pub struct Forwarder {
    link: Mutex<Option<Link>>,
    /// Whether a link is open. The leader's own callers go around the
    /// submit queue only when none is: payloads it may still hand back must
    /// be appended before anything newer.
    open: AtomicBool,
    /// Wakes the submit task to send on what a former leader handed back.
    pub handed_back: tokio::sync::Notify,
    /// The member that last handed payloads back, and this member's term
    /// and membership then: while we still take it for leader in that term,
    /// nothing goes its way (any leader after it is elected in a later
    /// term). A leader also hands back what a member it removed forwards;
    /// once that member is taken back, the membership is another, and the
    /// same leader in the same term takes its payloads again. (Keyed on the
    /// term alone, a follower evicted and taken back forwarded nothing to
    /// that leader any more: the simulation's flaky links found it, every
    /// payload dropped as "no leader reachable" until the next election.)
    stepped_down: std::sync::Mutex<Option<(MemberId, Stand)>>,
    /// Connections of followers this member handed payloads back to, as
    /// leader, that are still open: a leaving member waits for them.
    handing_back: std::sync::atomic::AtomicUsize,
    /// Woken when the last of them closes.
    all_closed: tokio::sync::Notify,
}

pub struct Link {
    leader: MemberId,
    writer: WriteHalf<PeerStream>,
    /// Set once the leader answered anything (it answers only what it did
    /// not take) or the connection ended: nothing more goes this way.
    ended: Arc<AtomicBool>,
    /// Ends with the connection, giving the frames the leader handed back.
    answers: JoinHandle<Frames>,
    /// Frames handed back so far: [`close`] waits on while this moves.
    returned: Arc<std::sync::atomic::AtomicUsize>,
    /// Whether what is written comes back ordered ([`crate::forward_watch`]).
    watch: Watch,
    /// Counts the connection among those open to the leader.
    _held: Held,
}

/// What became of payloads given to [`send`].
pub enum Sent {
    /// Written to the leader's connection.
    Written,
    /// Not sent now (no connection, or the leader we know of handed them
    /// back): to be tried again after a pause.
    NotNow(Frames),
}

impl Forwarder {
    pub async fn lock(&self) -> MutexGuard<'_, Option<Link>> {
        self.link.lock().await
    }

    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// Counts a follower's connection in [`Forwarder::wait_closed`] until
    /// the guard drops (when the connection ends).
    pub fn handing_back(&self) -> HandingBack<'_> {
        self.handing_back.fetch_add(1, Ordering::AcqRel);
        HandingBack(self)
    }

    /// Waits, at most `limit`, until every follower this member handed
    /// payloads back to closed its connection: it read every answer by then,
    /// and nothing it wrote is left unread here. A member that stops earlier
    /// drops what is still in those connections.
    pub async fn wait_closed(&self, limit: std::time::Duration) -> bool {
        let waiting = async {
            loop {
                let closed = self.all_closed.notified();
                if self.handing_back.load(Ordering::Acquire) == 0 {
                    return;
                }
                closed.await;
            }
        };
        tokio::time::timeout(limit, waiting).await.is_ok()
    }
}

/// A follower's connection that was handed payloads back, while open.
pub struct HandingBack<'a>(&'a Forwarder);

impl Drop for HandingBack<'_> {
    fn drop(&mut self) {
        if self.0.handing_back.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.all_closed.notify_waiters();
        }
    }
}

impl Link {
    fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// Ends a link whose payloads stopped coming back ordered, and says so.
    /// True when it is ended (for that or any other reason).
    fn end_if_stalled(&mut self, shared: &Shared) -> bool {
        if self.ended() || injected::active(Defect::ForwardLinkNeverStalls) {
            return self.ended();
        }
        // Twice a request's budget: a leader that is merely slow (a disk
        // stalled for seconds) must not be taken for a dead connection, as
        // closing on it could give up a backlog it still appends later,
        // after what the next connection carries.
        let patience = shared.request_timeout() * 2;
        let Some(stall) = self.watch.stalled(Instant::now(), shared.sm.own_applied(), patience) else {
            return false;
        };
        self.ended.store(true, Ordering::Release);
        info!(
            "Forwarding connection to leader {}: none of the {} payloads written to it came back ordered for \
             {:?}; closing it and opening another",
            self.leader, stall.waiting, stall.quiet
        );
        true
    }

    fn wrote(&mut self, count: usize, shared: &Shared) {
        self.watch.wrote(count as u64, Instant::now(), shared.sm.own_applied());
    }
}

/// On a follower, with nothing queued before it: the caller's own thread
/// writes `item` to the open link, when the link goes to the member that
/// leads now. Gives `item` back when it must be queued instead.
///
/// Not for a group runtime thread (`block_on` would panic there).
pub fn write_direct(shared: &Shared, runtime: &Handle, item: AppPayload) -> Result<(), AppPayload> {
    let Ok(mut slot) = shared.forwards.link.try_lock() else {
        return Err(item);
    };
    let Some(link) = slot.as_mut() else {
        return Err(item);
    };
    let leads = shared.leader().map(|(id, _)| id) == Some(link.leader);
    if !leads || shared.net.isolated() || link.end_if_stalled(shared) {
        return Err(item);
    }
    let leader = link.leader;
    let req = Request::Forward { payloads: vec![item] };
    let frame = match wire::encode_request(&req) {
        Ok(frame) => frame,
        Err(e) => {
            crate::transport::warn_unsendable(&leader.to_string(), &e);
            return Ok(());
        }
    };
    let written = shared.callers.run(runtime, &shared.closed, shared.request_timeout(), async {
        write_frame(&mut link.writer, &frame).await.map_err(|e| GroupError::Other(e.to_string()))
    });
    match written {
        Ok(()) => link.wrote(1, shared),
        Err(e) => {
            link.ended.store(true, Ordering::Release);
            info!("Lost 1 submitted payload on its way to leader {leader}: {e}");
        }
    }
    Ok(())
}

/// This member's term and the membership log entry it knows: where it
/// stood when a leader handed payloads back.
type Stand = (u64, Option<crate::raft::types::LogId>);

/// Sends `frames` to `leader` at `addr`, over the open link when it goes
/// there, else over a new one. A link to another member, or one that
/// ended, is closed first: what it handed back goes ahead of `frames`.
pub async fn send(
    shared: &Arc<Shared>,
    slot: &mut MutexGuard<'_, Option<Link>>,
    leader: MemberId,
    addr: &str,
    frames: Frames,
) -> Sent {
    let mut frames = frames;
    let stand: Stand = shared.with_metrics(|m| (m.current_term, *m.membership_config.log_id()));
    let stand = if injected::active(Defect::HandBackKeyedOnTermOnly) { (stand.0, None) } else { stand };
    let stepped_down = &shared.forwards.stepped_down;
    if slot.as_mut().is_some_and(|l| l.leader != leader || l.end_if_stalled(shared)) {
        let (from, mut back) = close(shared, slot).await;
        if let Some(from) = from.filter(|_| !back.is_empty()) {
            *lock(stepped_down) = Some((from, stand));
        }
        back.append(&mut frames);
        frames = back;
    }
    frames.retain(|f| !f.is_empty());
    if frames.is_empty() {
        return Sent::Written;
    }
    // Sent its way again, they would only come back: wait until we hear of
    // the next leader.
    if *lock(stepped_down) == Some((leader, stand)) {
        return Sent::NotNow(frames);
    }
    if slot.is_none() {
        match open(shared, leader, addr).await {
            Ok(link) => {
                **slot = Some(link);
                shared.forwards.open.store(true, Ordering::Release);
            }
            Err(e) => {
                debug!("Leader {leader} unreachable for forwarding: {e}");
                return Sent::NotNow(frames);
            }
        }
    }
    let Some(link) = slot.as_mut() else {
        return Sent::NotNow(frames);
    };
    let mut left: usize = frames.iter().map(Vec::len).sum();
    for payloads in frames {
        let count = payloads.len();
        let frame = match wire::encode_request(&Request::Forward { payloads }) {
            Ok(frame) => frame,
            Err(e) => {
                crate::transport::warn_unsendable(addr, &e);
                left -= count;
                continue;
            }
        };
        let written = tokio::time::timeout(shared.request_timeout(), write_frame(&mut link.writer, &frame))
            .await
            .unwrap_or_else(|_| Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "the leader reads nothing")));
        if let Err(e) = written {
            link.ended.store(true, Ordering::Release);
            info!("Lost {left} submitted payloads on their way to leader {leader}: {e}");
            break;
        }
        link.wrote(count, shared);
        left -= count;
    }
    Sent::Written
}

/// Closes the link, if one is open: no more is written to it, and the
/// leader, having read what was, ends the connection. Gives the member it
/// went to and the frames that member handed back, oldest first.
pub async fn close(shared: &Shared, slot: &mut MutexGuard<'_, Option<Link>>) -> (Option<MemberId>, Frames) {
    let Some(mut link) = slot.take() else {
        return (None, Vec::new());
    };
    shared.forwards.open.store(false, Ordering::Release);
    let _ = tokio::time::timeout(shared.request_timeout(), link.writer.shutdown()).await;
    let leader = link.leader;
    match await_hand_back(&mut link.answers, &link.returned, shared.request_timeout()).await {
        Some(back) => {
            if !back.is_empty() {
                let count: usize = back.iter().map(Vec::len).sum();
                info!(
                    "Member {leader} no longer leads: {count} forwarded payloads it handed back go to the next leader"
                );
            }
            (Some(leader), back)
        }
        None => {
            info!("Leader {leader} did not close the forwarding connection in time; what it held is given up");
            (Some(leader), Vec::new())
        }
    }
}

/// Waits for the answers task of a closed link to end, and gives what it
/// was handed back. A leader that neither reads nor closes (it hangs) keeps
/// whatever it holds: after `patience` without a frame handed back, it is
/// given up (`None`), as a lost answer is. One that is still handing back
/// is waited for, however long its backlog: a follower writing faster than
/// the leader takes may have a socket's worth of frames on the way (60,117
/// payloads in one run of the hand-over test), and giving up on them after
/// a fixed time lost them.
async fn await_hand_back(
    answers: &mut JoinHandle<Frames>,
    returned: &std::sync::atomic::AtomicUsize,
    patience: std::time::Duration,
) -> Option<Frames> {
    let mut seen = returned.load(Ordering::Acquire);
    loop {
        match tokio::time::timeout(patience, &mut *answers).await {
            Ok(Ok(back)) => return Some(back),
            Ok(Err(_)) => return Some(Vec::new()),
            Err(_) => {
                let now = returned.load(Ordering::Acquire);
                if now == seen {
                    answers.abort();
                    return None;
                }
                seen = now;
            }
        }
    }
}

async fn open(shared: &Arc<Shared>, leader: MemberId, addr: &str) -> Result<Link, String> {
    let timeout = shared.request_timeout();
    let OwnLink { stream, held } = tokio::time::timeout(timeout, shared.net.open(addr, leader))
        .await
        .map_err(|_| format!("no connection to {addr} within {timeout:?}"))?
        .map_err(|e| e.to_string())?;
    let (reader, writer) = tokio::io::split(stream);
    let ended = Arc::new(AtomicBool::new(false));
    let returned = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let answers = tokio::spawn(read_answers(shared.clone(), leader, reader, ended.clone(), returned.clone()));
    let watch = Watch::new(Instant::now(), shared.sm.own_applied());
    Ok(Link { leader, writer, ended, answers, returned, watch, _held: held })
}

/// Reads the leader's answers until the connection ends. The first frame
/// handed back ends the link and wakes the submit task, which sends it (and
/// what follows it) to the next leader even if nothing new is submitted.
async fn read_answers(
    shared: Arc<Shared>,
    leader: MemberId,
    mut reader: ReadHalf<PeerStream>,
    ended: Arc<AtomicBool>,
    returned: Arc<std::sync::atomic::AtomicUsize>,
) -> Frames {
    let mut back = Vec::new();
    loop {
        match wire::read_frame::<_, Response>(&mut reader).await {
            Ok(Response::Returned { payloads }) => {
                back.push(payloads);
                returned.fetch_add(1, Ordering::Release);
                if !ended.swap(true, Ordering::AcqRel) {
                    shared.forwards.handed_back.notify_one();
                }
            }
            // A leader whose group no longer has us (it removed us while
            // we were cut off): the rejoin takes us back, and the engine
            // resends what it still waits for. A note, not a warning.
            Ok(Response::Failed { reason }) => {
                ended.store(true, Ordering::Release);
                info!("Leader {leader} did not take forwarded payloads: {reason}");
            }
            Ok(other) => {
                ended.store(true, Ordering::Release);
                warn!("Leader {leader} answered forwarded payloads with {other:?}");
            }
            Err(e) => {
                ended.store(true, Ordering::Release);
                if !matches!(e, wire::WireError::Closed) {
                    debug!("Forwarding connection to member {leader} ended: {e}");
                }
                return back;
            }
        }
    }
}

async fn write_frame(writer: &mut WriteHalf<PeerStream>, frame: &[u8]) -> std::io::Result<()> {
    writer.write_all(frame).await?;
    writer.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    const PATIENCE: Duration = Duration::from_secs(2);

    /// A leader handing back `frames` frames, one every `gap`, then closing.
    fn handing_back(frames: usize, gap: Duration) -> (JoinHandle<Frames>, Arc<AtomicUsize>) {
        let returned = Arc::new(AtomicUsize::new(0));
        let counter = returned.clone();
        let task = tokio::spawn(async move {
            let mut back = Vec::new();
            for _ in 0..frames {
                tokio::time::sleep(gap).await;
                back.push(Vec::new());
                counter.fetch_add(1, Ordering::Release);
            }
            back
        });
        (task, returned)
    }

    /// The hand-over loss, on a clock the test controls: a leader handing
    /// back a backlog that takes longer than the patience in all, but never
    /// pauses that long, is waited for to the end. (With a fixed limit, as
    /// before, the follower gave all of it up after 2 s.)
    #[tokio::test(start_paused = true)]
    async fn a_leader_still_handing_back_is_waited_for_past_the_patience() {
        let (mut task, returned) = handing_back(50, Duration::from_millis(100));
        let started = tokio::time::Instant::now();
        let back = await_hand_back(&mut task, &returned, PATIENCE).await;
        assert_eq!(back.map(|b| b.len()), Some(50), "every frame handed back");
        assert!(started.elapsed() >= Duration::from_secs(5), "it took the leader 5 s");
    }

    /// A leader that hands nothing back and does not close is given up
    /// after the patience, and its task is stopped.
    #[tokio::test(start_paused = true)]
    async fn a_leader_that_hangs_is_given_up_after_the_patience() {
        let (mut task, returned) = handing_back(1, Duration::from_secs(3600));
        let started = tokio::time::Instant::now();
        assert!(await_hand_back(&mut task, &returned, PATIENCE).await.is_none());
        assert_eq!(started.elapsed(), PATIENCE);
        tokio::task::yield_now().await;
        assert!(task.is_finished(), "the answers task was stopped");
    }

    /// One that hands back some, then hangs: given up a patience after the
    /// last frame, not before.
    #[tokio::test(start_paused = true)]
    async fn a_leader_that_stops_handing_back_is_given_up_a_patience_later() {
        let returned = Arc::new(AtomicUsize::new(0));
        let counter = returned.clone();
        let mut task = tokio::spawn(async move {
            for _ in 0..3 {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                counter.fetch_add(1, Ordering::Release);
            }
            std::future::pending::<()>().await;
            Vec::new()
        });
        let started = tokio::time::Instant::now();
        assert!(await_hand_back(&mut task, &returned, PATIENCE).await.is_none());
        // Frames at 1.5, 3.0 and 4.5 s; looks at 2, 4 and 6 s see progress,
        // the one at 8 s none.
        assert_eq!(started.elapsed(), Duration::from_secs(8));
    }
}
