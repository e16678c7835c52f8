//! The applier side of a process (`applier.rs` of the shell), run one task
//! at a time, serially: every seqno is committed to the model database in
//! order (a write-set, a rolled-back loser, a view), which is what the
//! shell's apply and commit monitors guarantee with parallel appliers.
//!
//! ```text
//!   Connect(Found)    connect at V-1, deliver V, synced
//!   Connect(Resume X) the database must be at X; view at X; the queue is the IST
//!   Connect(Transfer) ask for a donor until one is named, wait for its image
//!                     (or give up after SST_TIMEOUT_MS: restart), install it
//!   Apply / Local     commit at seqno (Local: the client's own; acknowledged)
//!   View              commit the view's seqno, tell the core
//!   Donate            copy the database as it is at `after` to the joiner
//!   Synced            tell the core; ask the leader to make us a voter
//! ```

use tandem_engine::admission::{Admission, Plan};
use tandem_engine::certification::Verdict;
use tandem_engine::group_state::{Sender, ViewChange};
use tandem_engine::queue::Task;
use tandem_engine::types::{Seqno, Uuid};
use tandem_engine::waiter::Reply;
use tandem_engine::writeset::WriteSet;

use super::checks::{bank_total, fail, Checked};
use super::db::{decode_change, Change, Image};
use super::process::{Ctx, Process, Work};

/// How long a joiner's server waits for the donor's data before the
/// transfer fails (the SST script's timeout).
pub const SST_TIMEOUT_MS: u64 = 60_000;
/// How long the join task waits for the group to name a donor.
const DONOR_REPLY_WAIT_MS: u64 = 10_000;
/// Pause before asking again when no donor could be named.
const DONOR_RETRY_MS: u64 = 1_000;

/// The state transfer the join task is running.
#[derive(Debug)]
pub enum Sst {
    /// Asking the group for a donor: the request's token once sent, and
    /// when to (re)send it.
    Asking { token: Option<u64>, retry_ms: u64 },
    /// A donor was named; its copy of the database arrives in
    /// `Process::sst_inbox`.
    Waiting { donor: Uuid, since_ms: u64 },
}

/// A donor's copy of its database, on its way to the joiner.
pub struct Donation {
    pub joiner: Uuid,
    pub request: Vec<u8>,
    pub image: Image,
}

impl Process {
    /// One task of the applier queue, or a look at the state transfer in
    /// progress (it holds the queue). True when a task ran.
    pub fn applier_step(&mut self, ctx: &mut Ctx) -> Checked<bool> {
        if self.sst.is_some() {
            self.poll_sst(ctx)?;
            return Ok(false);
        }
        let Some(work) = self.queue.pop() else { return Ok(false) };
        match work {
            Work::Task(task) => self.run_task(task, ctx)?,
            Work::Local { seqno, verdict, ws, accounts } => {
                let acked = self.apply_write_set(seqno, &verdict, &ws, ctx)?;
                if acked && matches!(verdict, Verdict::Pass { .. }) {
                    ctx.world.history.acked.insert(ws.trx_id, seqno);
                }
                self.unlock(accounts);
            }
        }
        Ok(true)
    }

    fn run_task(&mut self, task: Task, ctx: &mut Ctx) -> Checked<()> {
        match task {
            Task::Apply { seqno, verdict, ws, .. } => self.apply_write_set(seqno, &verdict, &ws, ctx).map(|_| ()),
            Task::Connect(admission) => self.join(admission, ctx),
            Task::View(vc) => self.deliver_view(&vc, ctx),
            Task::NonPrimary { .. } => {
                self.core.on_non_primary_delivered();
                Ok(())
            }
            Task::Donate { after, request, joiner } => self.donate(after, request, joiner, ctx),
            Task::Synced { after } => self.become_synced(after, ctx),
            Task::Pass { .. } | Task::Final => Ok(()),
            Task::RestartRequired => {
                self.restart.get_or_insert_with(|| "restart required".into());
                Ok(())
            }
        }
    }

    /// Commits `seqno` unless the data already holds it (a received state
    /// covers it). True when committed now.
    fn commit(&mut self, seqno: Seqno, change: Option<Change>, ctx: &mut Ctx) -> Checked<bool> {
        if seqno <= ctx.db.position() {
            return Ok(false);
        }
        if let Err(why) = ctx.db.apply(seqno, change) {
            return fail("apply_order", format!("{}: {why}", ctx.name));
        }
        ctx.world.history.committed(ctx.name, seqno, &ctx.db.current)?;
        bank_total(ctx.name, &ctx.db.current)?;
        Ok(true)
    }

    fn apply_write_set(&mut self, seqno: Seqno, verdict: &Verdict, ws: &WriteSet, ctx: &mut Ctx) -> Checked<bool> {
        let change = matches!(verdict, Verdict::Pass { .. }).then(|| decode_change(ws.trx_id, &ws.data));
        if let Verdict::Pass { depends_on } = verdict {
            assert!(*depends_on < seqno, "a write-set depends on an earlier one");
        }
        self.commit(seqno, change, ctx)
    }

    /// A primary view consumes its seqno (`deliver_view`).
    fn deliver_view(&mut self, vc: &ViewChange, ctx: &mut Ctx) -> Checked<()> {
        if !self.commit(vc.state_id.seqno, None, ctx)? {
            return Ok(());
        }
        let commands = self.core.on_view_delivered(vc);
        self.execute(commands, ctx)
    }

    /// The join task: the server is connected as the plan says.
    fn join(&mut self, admission: Admission, ctx: &mut Ctx) -> Checked<()> {
        self.core.members = admission.view.members.clone();
        let vc = &admission.view;
        match admission.plan {
            Plan::Found => {
                ctx.db.connect_at(vc.state_id.uuid, vc.state_id.seqno - 1);
                self.deliver_view(vc, ctx)?;
                self.core.on_connected(&Plan::Found);
                self.queue.release_hold();
            }
            Plan::Resume { position } => {
                if ctx.db.gtid().seqno != position {
                    let at = ctx.db.gtid();
                    return fail("resume_position", format!("{} resumed at {position}, its data is at {at}", ctx.name));
                }
                ctx.db.connect_at(vc.state_id.uuid, position);
                self.core.on_connected(&admission.plan);
                let commands = self.core.on_view_delivered(vc);
                self.execute(commands, ctx)?;
                self.queue.release_hold();
            }
            Plan::Transfer => {
                self.core.on_connected(&Plan::Transfer);
                self.sst = Some(Sst::Asking { token: None, retry_ms: ctx.now_ms });
            }
        }
        Ok(())
    }

    fn poll_sst(&mut self, ctx: &mut Ctx) -> Checked<()> {
        let sst = self.sst.take().expect("a state transfer in progress");
        self.sst = match sst {
            Sst::Asking { token, retry_ms } if ctx.now_ms >= retry_ms => {
                if let Some(old) = token {
                    self.abandon(old);
                }
                let token = self.send_state_request(ctx);
                Some(Sst::Asking { token: Some(token), retry_ms: ctx.now_ms + DONOR_REPLY_WAIT_MS })
            }
            Sst::Waiting { .. } if self.sst_inbox.is_some() => {
                let image = self.sst_inbox.take().expect("checked");
                return self.state_received(image, ctx);
            }
            Sst::Waiting { donor, .. } if !self.core.view_members.contains(&donor) => {
                Some(Sst::Asking { token: None, retry_ms: ctx.now_ms })
            }
            Sst::Waiting { since_ms, .. } if ctx.now_ms >= since_ms + SST_TIMEOUT_MS => {
                // The server emptied its data directory for the transfer.
                ctx.db.wipe();
                self.restart = Some("the state transfer failed (timed out)".into());
                None
            }
            other => Some(other),
        };
        Ok(())
    }

    /// The group answered the state transfer request (or it was lost).
    pub fn on_donor_reply(&mut self, reply: Reply, ctx: &mut Ctx) {
        if !matches!(self.sst, Some(Sst::Asking { .. })) {
            return;
        }
        self.sst = Some(match reply {
            Reply::Donor(Some(donor)) => {
                self.core.on_donor_found();
                Sst::Waiting { donor, since_ms: ctx.now_ms }
            }
            _ => Sst::Asking { token: None, retry_ms: ctx.now_ms + DONOR_RETRY_MS },
        });
    }

    /// The donor's copy, if this process asked for it. The server listens
    /// from before its request is sent, so the data may arrive before the
    /// group's answer naming the donor does.
    pub fn offer_state(&mut self, donation: &Donation) -> bool {
        let mine = format!("sst to {} incarnation {}", self.me.uuid, self.me.incarnation).into_bytes();
        let taken = self.sst.is_some() && donation.request == mine && self.sst_inbox.is_none();
        if taken {
            self.sst_inbox = Some(donation.image.clone());
        }
        taken
    }

    fn state_received(&mut self, image: Image, ctx: &mut Ctx) -> Checked<()> {
        ctx.world.trace.note(&[20, image.position as u64]);
        ctx.db.install(image);
        bank_total(ctx.name, &ctx.db.current)?;
        let commands = self.core.on_state_received();
        self.queue.release_hold();
        self.execute(commands, ctx)
    }

    /// Everything up to `after` is committed here (the queue is serial):
    /// the joiner gets the database as of `after`.
    fn donate(&mut self, after: Seqno, request: Vec<u8>, joiner: Sender, ctx: &mut Ctx) -> Checked<()> {
        if ctx.db.position() != after {
            let at = ctx.db.position();
            return fail("apply_order", format!("{} donates at {after} with its data at {at}", ctx.name));
        }
        self.core.on_donating(joiner);
        ctx.world.donations.push(Donation { joiner: joiner.uuid, request, image: ctx.db.current.clone() });
        ctx.world.stats.donations += 1;
        // The simulated donation never fails.
        let commands = self.core.on_sst_sent(0);
        self.execute(commands, ctx)
    }

    fn become_synced(&mut self, after: Seqno, ctx: &mut Ctx) -> Checked<()> {
        if ctx.db.position() < after {
            let at = ctx.db.position();
            return fail("apply_order", format!("{} synced at {after} with its data at {at}", ctx.name));
        }
        if self.core.desyncs > 0 {
            return Ok(());
        }
        self.core.on_synced_reached();
        ctx.world.promotions.push(self.me.member);
        Ok(())
    }
}
