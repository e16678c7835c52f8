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
//! its leadership over, once what it already took is in its log
//! ([`Forwarder::wait_taken`]). They go to the next leader ahead of anything
//! newer, so a leader change does not lose what reached a live member.
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

use crate::raft::state_machine::lock;
use crate::raft::types::AppPayload;
use crate::shared::Shared;
use crate::transport::tls::PeerStream;
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
    /// then: while we still take it for leader in that term, nothing goes
    /// its way (any leader after it is elected in a later term).
    stepped_down: std::sync::Mutex<Option<(MemberId, u64)>>,
    /// Forwards this member, as leader, is taking into its log now
    /// ([`crate::submit::handle_forward`]): a hand-over of the leadership
    /// waits for them (see [`Forwarder::wait_taken`]).
    pub taking: std::sync::atomic::AtomicUsize,
}

pub struct Link {
    leader: MemberId,
    writer: WriteHalf<PeerStream>,
    /// Set once the leader answered anything (it answers only what it did
    /// not take) or the connection ended: nothing more goes this way.
    ended: Arc<AtomicBool>,
    /// Ends with the connection, giving the frames the leader handed back.
    answers: JoinHandle<Frames>,
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

    /// Once `Shared::handing_over` is set, waits (at most `limit`) for the
    /// forwards that saw it unset to reach the Raft core. The core takes
    /// requests in order, so they are in the log before the transfer starts;
    /// after it the core drops new entries without a word, and every later
    /// forward is handed back instead. A forward counts itself in before it
    /// reads the flag, and the flag is set before this counts: either the
    /// forward sees the flag, or this sees the forward.
    pub async fn wait_taken(&self, limit: std::time::Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while self.taking.load(Ordering::SeqCst) != 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
}

/// Counts a forward out of [`Forwarder::taking`], however it ends.
pub struct Taking<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Taking<'a> {
    pub fn start(count: &'a std::sync::atomic::AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Taking(count)
    }
}

impl Drop for Taking<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Link {
    fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
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
    if link.ended() || !leads || shared.net.isolated() {
        return Err(item);
    }
    let leader = link.leader;
    let req = Request::Forward {
        payloads: vec![item],
    };
    let frame = match wire::encode_request(&req) {
        Ok(frame) => frame,
        Err(e) => {
            crate::transport::warn_unsendable(&leader.to_string(), &e);
            return Ok(());
        }
    };
    let written = shared
        .callers
        .run(runtime, &shared.closed, shared.request_timeout(), async {
            write_frame(&mut link.writer, &frame)
                .await
                .map_err(|e| GroupError::Other(e.to_string()))
        });
    if let Err(e) = written {
        link.ended.store(true, Ordering::Release);
        info!("Lost 1 submitted payload on its way to leader {leader}: {e}");
    }
    Ok(())
}

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
    let term = shared.with_metrics(|m| m.current_term);
    let stepped_down = &shared.forwards.stepped_down;
    if slot
        .as_ref()
        .is_some_and(|l| l.leader != leader || l.ended())
    {
        let (from, mut back) = close(shared, slot).await;
        if let Some(from) = from.filter(|_| !back.is_empty()) {
            *lock(stepped_down) = Some((from, term));
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
    if *lock(stepped_down) == Some((leader, term)) {
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
        let written = tokio::time::timeout(
            shared.request_timeout(),
            write_frame(&mut link.writer, &frame),
        )
        .await
        .unwrap_or_else(|_| {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the leader reads nothing",
            ))
        });
        if let Err(e) = written {
            link.ended.store(true, Ordering::Release);
            info!("Lost {left} submitted payloads on their way to leader {leader}: {e}");
            break;
        }
        left -= count;
    }
    Sent::Written
}

/// Closes the link, if one is open: no more is written to it, and the
/// leader, having read what was, ends the connection. Gives the member it
/// went to and the frames that member handed back, oldest first.
pub async fn close(
    shared: &Shared,
    slot: &mut MutexGuard<'_, Option<Link>>,
) -> (Option<MemberId>, Frames) {
    let Some(mut link) = slot.take() else {
        return (None, Vec::new());
    };
    shared.forwards.open.store(false, Ordering::Release);
    let _ = tokio::time::timeout(shared.request_timeout(), link.writer.shutdown()).await;
    let leader = link.leader;
    // A leader that neither reads nor closes (it hangs) keeps whatever it
    // holds: given up, as a lost answer is.
    match tokio::time::timeout(shared.request_timeout(), &mut link.answers).await {
        Ok(Ok(back)) => {
            if !back.is_empty() {
                let count: usize = back.iter().map(Vec::len).sum();
                info!("Member {leader} no longer leads: {count} forwarded payloads it handed back go to the next leader");
            }
            (Some(leader), back)
        }
        Ok(Err(_)) => (Some(leader), Vec::new()),
        Err(_) => {
            link.answers.abort();
            info!("Leader {leader} did not close the forwarding connection in time; what it held is given up");
            (Some(leader), Vec::new())
        }
    }
}

async fn open(shared: &Arc<Shared>, leader: MemberId, addr: &str) -> Result<Link, String> {
    let timeout = shared.request_timeout();
    let stream = tokio::time::timeout(timeout, shared.net.open(addr, leader))
        .await
        .map_err(|_| format!("no connection to {addr} within {timeout:?}"))?
        .map_err(|e| e.to_string())?;
    let (reader, writer) = tokio::io::split(stream);
    let ended = Arc::new(AtomicBool::new(false));
    let answers = tokio::spawn(read_answers(shared.clone(), leader, reader, ended.clone()));
    Ok(Link {
        leader,
        writer,
        ended,
        answers,
    })
}

/// Reads the leader's answers until the connection ends. The first frame
/// handed back ends the link and wakes the submit task, which sends it (and
/// what follows it) to the next leader even if nothing new is submitted.
async fn read_answers(
    shared: Arc<Shared>,
    leader: MemberId,
    mut reader: ReadHalf<PeerStream>,
    ended: Arc<AtomicBool>,
) -> Frames {
    let mut back = Vec::new();
    loop {
        match wire::read_frame::<_, Response>(&mut reader).await {
            Ok(Response::Returned { payloads }) => {
                back.push(payloads);
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
