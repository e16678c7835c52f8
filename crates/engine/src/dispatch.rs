//! What each ordered outcome means for this node: wake the client that
//! waits for it, or queue work for the appliers. Also the adapter through
//! which the group drives the replicated state, and connectivity changes.

use std::sync::atomic::Ordering;
use std::time::Instant;

use tandem_group::{Connectivity, Ordered, Replica};

use crate::certification::Verdict;
use crate::group_state::{GroupState, Outcome, ViewChange};
use crate::message::{Body, MemberState};
use crate::node::{Node, Resubmit, PROGRESS_INTERVAL};
use crate::queue::Task;
use crate::types::Seqno;
use crate::waiter::Reply;

/// The deterministic replica the group drives, plus the step from outcome
/// to local work.
pub(crate) struct NodeReplica {
    pub(crate) node: Node,
    pub(crate) state: GroupState,
}

impl Replica for NodeReplica {
    fn apply(&mut self, event: Ordered<'_>) {
        let outcome = self.state.apply(event);
        self.node.dispatch(outcome, &self.state);
    }

    fn snapshot(&self) -> Vec<u8> {
        self.state.encode()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        if self.node.inner.local.lock().in_group {
            log::error!("Received a group snapshot while already a member: ordered events were lost; restart this node");
        }
        self.state = GroupState::decode(snapshot)?;
        // A snapshot taken after we were added carries the view that includes
        // us; no membership event will follow, so this is where we join.
        if self.state.member(self.node.me()).is_some() {
            let view = self.state.current_view();
            self.node.dispatch(Outcome::View(view), &self.state);
        }
        Ok(())
    }

    fn connectivity(&mut self, now: Connectivity) {
        self.node.on_connectivity(now, self.state.seqno);
    }
}

impl Node {
    pub(crate) fn dispatch(&self, outcome: Outcome, state: &GroupState) {
        let inner = &self.inner;
        let me = self.me();
        let in_group = {
            let mut l = inner.local.lock();
            l.last_ordered = state.seqno;
            l.in_group
        };
        match outcome {
            Outcome::Nothing => {}
            Outcome::WriteSet { token, seqno, verdict, ws } => {
                if let Verdict::Pass { depends_on } = verdict {
                    inner.stats.note_dependency(seqno - depends_on);
                }
                if seqno % PROGRESS_INTERVAL == 0 {
                    // Lets every member purge certification keys we no longer need.
                    let _ = self.submit(Body::Progress(self.safe_seqno()));
                }
                if ws.source == me && inner.waiters.complete(token, Reply::Ordered { seqno, verdict: verdict.clone() }) {
                    return;
                }
                // Remote, or local whose client gave up: apply like any other.
                if in_group {
                    inner.queue.push(Task::Apply { seqno, verdict, ws });
                }
            }
            Outcome::View(vc) => self.dispatch_view(vc, state, in_group),
            Outcome::Causal { source, token, seqno } => {
                if source == me {
                    inner.waiters.complete(token, Reply::Causal(seqno));
                }
            }
            Outcome::StateRequest { joiner, token, donor, request, seqno } => {
                if donor == Some(me) && in_group {
                    inner.queue.push(Task::Donate { after: seqno, request, joiner });
                }
                if joiner == me {
                    inner.waiters.complete(token, Reply::Donor(donor));
                }
            }
            Outcome::MemberState { member, state: MemberState::Synced, seqno } if member == me => {
                inner.queue.push(Task::Synced { after: seqno });
            }
            Outcome::MemberState { .. } => {}
        }
    }

    fn dispatch_view(&self, vc: ViewChange, state: &GroupState, in_group: bool) {
        let me = self.me();
        let inner = &self.inner;
        let included = vc.members.iter().any(|m| m.uuid == me);
        {
            let mut l = inner.local.lock();
            l.view_members = vc.members.iter().map(|m| m.uuid).collect();
            l.views_ordered += 1;
        }
        match (in_group, included) {
            (false, true) => {
                {
                    let mut l = inner.local.lock();
                    l.in_group = true;
                    l.primary = true;
                    l.group_uuid = state.group_uuid;
                }
                inner.queue.push(Task::Connect(vc));
            }
            (true, true) => inner.queue.push(Task::View(vc)),
            (true, false) if inner.closing.load(Ordering::Acquire) => {} // our own graceful leave
            (true, false) => {
                log::error!("This node was removed from the primary component; restart it to rejoin");
                inner.local.lock().primary = false;
                inner.queue.push(Task::NonPrimary { after: state.seqno - 1 });
            }
            (false, false) => {}
        }
    }

    fn on_connectivity(&self, now: Connectivity, seqno: Seqno) {
        let inner = &self.inner;
        let mut l = inner.local.lock();
        match now {
            Connectivity::NonPrimary { .. } => {
                if l.primary {
                    l.primary = false;
                    l.non_primary_since = Some(Instant::now());
                    if l.in_group {
                        inner.queue.push(Task::NonPrimary { after: seqno });
                    }
                }
                drop(l);
                inner.waiters.wake_all();
            }
            Connectivity::Primary => {
                let was_cut_off = !l.primary && l.in_group;
                l.primary = true;
                l.non_primary_since = None;
                drop(l);
                if was_cut_off {
                    log::info!("Back in the primary component");
                    self.announce_return();
                }
            }
        }
    }
}

impl Node {
    /// Asks the group for a fresh primary view after we were cut off. Runs on
    /// its own thread and repeats the request until a view is ordered: the
    /// group may report us primary a moment before it accepts submissions,
    /// and a request accepted just before a leader change is lost; either
    /// would leave the node non-primary for good.
    fn announce_return(&self) {
        let views_before = self.inner.local.lock().views_ordered;
        let next = move |node: &Node| {
            let l = node.inner.local.lock();
            let done = node.inner.closing.load(Ordering::Acquire) || !l.primary || l.views_ordered > views_before;
            if done { Resubmit::Done } else { Resubmit::Send }
        };
        if let Err(e) = self.resubmit_until("tandem-view-bump", || Body::ViewBump, next) {
            log::warn!("Could not start the view bump thread: {e}");
        }
    }
}
