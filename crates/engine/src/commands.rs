//! Carrying out what the pure core decided (`crate::core::Command`), in
//! order, and feeding it the group's connectivity reports.

use crate::core::Command;
use crate::message::Body;
use crate::node::Node;
use crate::queue::Task;
use crate::types::Seqno;
use crate::waiter::Reply;

impl Node {
    /// Carries out what the core decided, in order.
    pub(crate) fn execute(&self, commands: Vec<Command>) {
        for command in commands {
            self.execute_one(command);
        }
    }

    fn execute_one(&self, command: Command) {
        let inner = &self.inner;
        match command {
            Command::Submit(body) => self.send_unwaited(body),
            Command::WriteSet { waiter, seqno, verdict, ws, origin, apply } => {
                if let crate::certification::Verdict::Pass { depends_on } = verdict {
                    inner.stats.note_dependency(seqno - depends_on);
                }
                let taken = waiter.is_some_and(|token| {
                    inner.waiters.complete(token, Reply::Ordered { seqno, verdict: verdict.clone() })
                });
                // Remote, or local whose client gave up: apply like any other.
                // A rollback fragment is applied on its origin as well.
                if (!taken || ws.is_stream_rollback()) && apply {
                    inner.queue.push(Task::Apply { seqno, verdict, ws, origin });
                    self.check_flow_control();
                }
            }
            Command::Reply { token, reply } => {
                inner.waiters.complete(token, reply);
            }
            Command::Queue(task) => inner.queue.push(task),
            Command::Admit(admission) => inner.queue.push_front(Task::Connect(admission)),
            Command::WakeWaiters => {
                inner.waiters.wake_all();
                inner.flow.wake_all();
            }
            Command::ReportProgress => self.send_unwaited(Body::Progress(self.safe_seqno())),
            Command::ReleaseLog(seqno) => {
                if let Some(group) = self.group() {
                    group.release_upto(seqno);
                }
            }
            Command::IstProgress { member, committed, first, last } => {
                self.log_ist_progress(&member, committed, first, last)
            }
            Command::RestartRequired(why) => {
                log::error!("{why}. This is unrecoverable, restart required.");
                inner.queue.push_front(Task::RestartRequired);
            }
            Command::VotesChanged => {
                inner.votes_changed.notify_all();
            }
            Command::Inconsistent { seqno, mine, winner } => self.leave_inconsistent(seqno, mine, winner),
            Command::TransferFailed { donor, code } => {
                // Galera's shape ("<donor>: State transfer to <joiner> failed"),
                // which the suite's suppressions and operators' greps know.
                log::warn!("{donor}: State transfer to this node failed: {code}");
                inner.transfer.donor_failed(code);
            }
        }
    }

    /// Sends a message nobody waits for: on the group's own thread (a
    /// replica callback) without waiting for `send_order`, as the group's
    /// threads never do (see `crate::send`); elsewhere at once. (A progress
    /// report, due every `PROGRESS_INTERVAL` seqnos inside the callback,
    /// once went straight to `submit` and waited for `send_order` there.)
    fn send_unwaited(&self, body: Body) {
        if crate::callback::in_replica_callback() {
            self.send_or_queue(body);
        } else {
            self.submit_now(body);
        }
    }

    /// IST progress of a joiner, logged by the member that serves the log
    /// (the group's leader), about every tenth of the range.
    fn log_ist_progress(&self, member: &str, committed: Seqno, first: Seqno, last: Seqno) {
        let Some(group) = self.group() else { return };
        let status = group.status();
        if status.leader != Some(status.me) || last < first {
            return;
        }
        let done = (committed - first + 1).clamp(0, last - first + 1);
        log::info!(
            "IST to {member}: {}% complete, applied seqno {committed} of {first}-{last}",
            done * 100 / (last - first + 1)
        );
    }

    /// Handles a connectivity report from the group.
    pub(crate) fn on_connectivity(&self, primary: bool, reachable: Vec<crate::view::ViewMember>) {
        let commands = {
            let mut core = self.inner.core.lock();
            core.on_connectivity(primary, reachable, self.now_ms())
        };
        self.execute(commands);
    }
}
