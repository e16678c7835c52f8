//! What client (session) threads call: local transactions from first key to
//! release, TOI, causal reads, pause and desync.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tandem_group::GroupError;

use crate::app::{Applied, ApplyJob};
use crate::certification::Verdict;
use crate::local_trx::{LocalTrx, TrxBody};
use crate::message::Body;
use crate::monitor::Interrupted;
use crate::node::Node;
use crate::stats::Stats;
use crate::types::{Gtid, Seqno, SEQNO_UNDEFINED};
use crate::waiter::Reply;
use crate::writeset::{flags, Key, KeyType, WriteSet};

pub use crate::local_trx::{Ordered, Status, TRACKED};

impl Node {
    fn trx(&self, trx_id: u64) -> Arc<LocalTrx> {
        self.inner
            .local
            .open
            .lock()
            .entry(trx_id)
            .or_insert_with(|| {
                Arc::new(LocalTrx {
                    trx_id,
                    body: Mutex::new(TrxBody { seqno: SEQNO_UNDEFINED, ..TrxBody::default() }),
                    aborted: AtomicBool::new(false),
                })
            })
            .clone()
    }

    fn known_trx(&self, trx_id: u64) -> Option<Arc<LocalTrx>> {
        self.inner.local.open.lock().get(&trx_id).cloned()
    }

    pub fn append_key(&self, trx_id: u64, parts: Vec<Vec<u8>>, kind: KeyType) {
        let trx = self.trx(trx_id);
        let mut b = trx.body.lock();
        Stats::add(&self.inner.stats.repl_keys, 1);
        Stats::add(&self.inner.stats.repl_keys_bytes, parts.iter().map(|p| p.len() as u64).sum());
        b.keys.push(Key { parts, kind });
    }

    pub fn append_data(&self, trx_id: u64, data: &[u8]) {
        self.trx(trx_id).body.lock().data.extend_from_slice(data);
    }

    /// Replicates and certifies a local transaction.
    pub fn certify(&self, conn_id: u64, trx_id: u64, trx_flags: u32) -> (Status, Ordered) {
        let since = Instant::now();
        let trx = self.trx(trx_id);
        if trx.aborted.load(Ordering::Acquire) {
            return (Status::TrxFail, Ordered::NONE);
        }
        if let Err(status) = self.wait_for_flow_control(Some(&trx.aborted)) {
            return (status, Ordered::NONE);
        }
        let ws = {
            let mut b = trx.body.lock();
            b.flags = trx_flags;
            b.conn_id = conn_id;
            b.certifying_since = Some(since);
            let (keys, data) = (std::mem::take(&mut b.keys), std::mem::take(&mut b.data));
            self.write_set(trx_id, conn_id, trx_flags, keys, data)
        };
        if let Err(status) = self.check_size(&ws) {
            self.landed(ws.last_seen);
            return (status, Ordered::NONE);
        }
        let (result, ws) = self.replicate_write_set(ws);
        // Kept for a replay after a BF abort.
        trx.body.lock().data = ws.data;
        let (seqno, verdict) = match result {
            Ok(r) => r,
            Err(status) => return (status, Ordered::NONE),
        };
        self.wait_while_paused(seqno, &trx.aborted);
        let ordered = self.ordered(seqno, &verdict);
        let passed = matches!(verdict, Verdict::Pass { .. });
        {
            let mut b = trx.body.lock();
            b.seqno = seqno;
            b.depends_on = ordered.depends_on;
            b.passed = passed;
            b.streaming = passed && trx_flags & (flags::TRX_END | flags::ROLLBACK) == 0;
        }
        let status = match verdict {
            Verdict::Fail => {
                Stats::add(&self.inner.stats.local_cert_failures, 1);
                Status::TrxFail
            }
            // Ordered and certified, but an applier aborted it meanwhile:
            // the server rolls back and replays it.
            Verdict::Pass { .. } if trx.aborted.load(Ordering::Acquire) => {
                self.new_lock_epoch("a certified transaction is rolled back to be replayed");
                Status::BfAbort
            }
            Verdict::Pass { .. } => Status::Ok,
        };
        (status, ordered)
    }

    fn write_set(&self, trx_id: u64, conn_id: u64, trx_flags: u32, keys: Vec<Key>, data: Vec<u8>) -> WriteSet {
        let (last_seen, safe) = self.inner.local.in_flight.enter(|| self.inner.apply.last_left());
        WriteSet { source: self.me(), trx_id, conn_id, flags: trx_flags, last_seen, safe, keys, data }
    }

    fn landed(&self, last_seen: Seqno) {
        self.inner.local.in_flight.leave(last_seen);
    }

    /// A write-set ordered after a pause (FTWRL, BACKUP STAGE BLOCK_DDL) gets
    /// its verdict only at resume, as Galera's certification waits in the
    /// local monitor that its pause holds. The verdict is already decided,
    /// but handing it out now would let a failed transaction release its
    /// locks during the pause (and then wait in the commit order anyway);
    /// BACKUP STAGE relies on it waiting with them. A BF abort ends the wait.
    fn wait_while_paused(&self, seqno: Seqno, aborted: &AtomicBool) {
        let _ = self.inner.commit.enter(seqno, Seqno::MIN, Some(aborted), None);
    }

    fn check_size(&self, ws: &WriteSet) -> Result<(), Status> {
        let max = self.inner.hot.max_ws_size();
        let size = ws.data.len() + ws.keys.iter().flat_map(|k| &k.parts).map(Vec::len).sum::<usize>();
        if size as i64 > max {
            log::warn!(
                "Maximum writeset size exceeded by {}: {size} bytes, repl.max_ws_size is {max}",
                size as i64 - max
            );
            return Err(Status::SizeExceeded);
        }
        if size > tandem_group::MAX_PAYLOAD_BYTES {
            warn_beyond_group_limit(size);
            return Err(Status::SizeExceeded);
        }
        Ok(())
    }

    fn ordered(&self, seqno: Seqno, verdict: &Verdict) -> Ordered {
        let depends_on = match verdict {
            Verdict::Pass { depends_on } => *depends_on,
            Verdict::Fail => seqno - 1,
        };
        Ordered { gtid: Gtid { uuid: self.inner.core.lock().group_uuid(), seqno }, depends_on, source: self.node_id() }
    }

    /// Replicates `ws` and hands it back (its data is needed for a replay).
    fn replicate_write_set(&self, ws: WriteSet) -> (Result<(Seqno, Verdict), Status>, WriteSet) {
        let bytes = ws.data.len() as u64;
        let last_seen = ws.last_seen;
        let (reply, body) = self.replicate_body(Body::WriteSet(ws));
        self.landed(last_seen);
        let Body::WriteSet(ws) = body else { unreachable!("the body we sent") };
        let result = match reply {
            Ok(Reply::Ordered { seqno, verdict }) => {
                Stats::add(&self.inner.stats.replicated, 1);
                Stats::add(&self.inner.stats.replicated_bytes, bytes);
                Stats::add(&self.inner.stats.repl_data_bytes, bytes);
                Ok((seqno, verdict))
            }
            Ok(other) => {
                log::error!("Unexpected reply to a write-set: {other:?}");
                Err(Status::NodeFail)
            }
            Err(status) => Err(status),
        };
        (result, ws)
    }

    /// Sends `body` through the total order and waits for it to come back,
    /// handing the body back to the caller. Gives up only once the node has
    /// been out of the primary component for the suspect timeout; a
    /// write-set ordered after that is applied like a remote one, so no node
    /// ever misses it.
    fn replicate_body(&self, body: Body) -> (Result<Reply, Status>, Body) {
        let inner = &self.inner;
        let (primary, joined) = {
            let core = inner.core.lock();
            (core.is_primary(), core.takes_local_write_sets())
        };
        if !primary {
            return (Err(Status::ConnFail), body);
        }
        if !joined {
            // Galera's answer before JOINED; the server's client sees a
            // failed replication and may try again once the node is ready.
            log::debug!("A local write-set refused: this node is not in step with the group yet");
            return (Err(Status::TrxFail), body);
        }
        let sent = self.send(body, true);
        let body = sent.body;
        match sent.result {
            Ok(()) => {}
            // Keys and headers took a write-set that passed `check_size`
            // over the limit: as refused, not as a lost connection.
            Err(GroupError::TooLarge { bytes, .. }) => {
                warn_beyond_group_limit(bytes);
                return (Err(Status::SizeExceeded), body);
            }
            Err(e) => {
                log::debug!("Replication failed: {e}");
                return (Err(Status::ConnFail), body);
            }
        }
        let (token, slot) = sent.waiter.expect("waiter registered");
        let reply = match self.await_reply(token, &slot) {
            Ok(Reply::Lost) => {
                log::info!(
                    "A message of ours was not ordered before a later one (leader change): the transaction is rolled \
                     back here; should the message still reach the group, it is applied like a remote write-set"
                );
                // A later message of ours was ordered first. A forward the
                // leader did not answer in time may still reach it after
                // that, so "lost" is not certain: the locks go as if the
                // client had given up.
                self.new_lock_epoch("a write-set taken for lost may still be ordered");
                Err(Status::ConnFail)
            }
            other => other,
        };
        (reply, body)
    }

    fn await_reply(&self, token: u64, slot: &crate::waiter::Slot) -> Result<Reply, Status> {
        let inner = &self.inner;
        let grace_ms = u64::try_from(inner.hot.suspect().as_millis()).unwrap_or(u64::MAX);
        let mut probed = Instant::now();
        loop {
            if let Some(reply) = slot.wait(Duration::from_millis(100)) {
                return Ok(reply);
            }
            // A probe of ours coming back ordered proves whether we were lost.
            if probed.elapsed() >= Duration::from_secs(1) {
                probed = Instant::now();
                let _ = self.send(Body::Causal, true);
            }
            let now = self.now_ms();
            let cut_off = inner.core.lock().cut_since_ms().is_some_and(|since| now.saturating_sub(since) >= grace_ms);
            if cut_off || inner.closing.load(Ordering::Acquire) {
                if inner.waiters.abandon(token) {
                    self.new_lock_epoch("gave up waiting for a write-set the group may still order");
                    return Err(Status::ConnFail);
                }
                // The reply won the race: it is (about to be) in the slot.
                return slot.wait(Duration::from_secs(3600)).ok_or(Status::ConnFail);
            }
        }
    }

    pub fn commit_order_enter(&self, trx_id: u64, opaque: usize, seqno: Seqno) -> Status {
        let trx = if opaque == TRACKED { self.known_trx(trx_id) } else { None };
        let abort = trx.as_ref().map(|t| &t.aborted);
        let waited = self.wait_in_order(&self.inner.commit, seqno, seqno - 1, abort);
        if waited.is_ok() {
            return Status::Ok;
        }
        // An applier's write-set is already ordered and certified; only a
        // local client's rollback lets its row locks go early.
        if trx.is_some() {
            self.new_lock_epoch("a transaction waiting to commit is rolled back");
        }
        match trx {
            // Its turn never comes here (the node left before what precedes
            // it was applied): rolled back, and not replayed. The group
            // ordered it, so this node gets it back by IST at its next start.
            Some(_) if waited == Err(Interrupted::Closed) => Status::TrxFail,
            // A fragment is not replayed: the server rolls the transaction
            // back, as Galera has it fail here.
            Some(t) if !t.ordered_at().1 => Status::TrxFail,
            _ => Status::BfAbort,
        }
    }

    /// A non-empty `error` is the server's apply failure: the group votes
    /// (`voting.rs`) before later seqnos may commit, as Galera does.
    pub fn commit_order_leave(&self, seqno: Seqno, error: &[u8]) -> Status {
        let status =
            if error.is_empty() { Status::Ok } else { self.vote_on_failure(seqno, error, "Failed to apply writeset") };
        self.inner.commit.leave(seqno);
        status
    }

    /// Votes this node's failure on `seqno` and waits for the group's
    /// decision: Ok if the majority failed in the same way (every node rolled
    /// it back), NodeFail if this node is the odd one out (it is leaving).
    fn vote_on_failure(&self, seqno: Seqno, error: &[u8], what: &str) -> Status {
        let text = String::from_utf8_lossy(error);
        let reason: String = text.trim_matches(|c: char| c == '\0' || c.is_whitespace()).chars().take(512).collect();
        let code = crate::voting::code_of(error);
        log::info!("{what} {seqno}, error: {reason}; voting {code:016x}");
        let applied = self.inner.apply.last_left();
        let policy = u32::try_from(self.inner.options.lock().int("gcs.vote_policy")).unwrap_or(u32::MAX);
        let commands = self.inner.core.lock().vote_failed(seqno, code, reason, applied, policy);
        self.execute(commands);
        let mut core = self.inner.core.lock();
        loop {
            if let Some(winner) = core.vote_decision(seqno) {
                drop(core);
                if winner == code {
                    return Status::Ok;
                }
                // Nothing after `seqno` may be applied here from now on.
                self.await_inconsistent_mark();
                return Status::NodeFail;
            }
            if self.inner.closing.load(Ordering::Acquire) {
                // `disconnect` marks the data inconsistent (undecided failure).
                return Status::NodeFail;
            }
            self.inner.votes_changed.wait_for(&mut core, Duration::from_millis(500));
        }
    }

    /// End of a local transaction (committed or rolled back), or of one
    /// fragment of a streaming transaction, which then goes on.
    pub fn release(&self, trx_id: u64, opaque: usize) -> Status {
        if opaque != TRACKED {
            return Status::Ok;
        }
        let mut open = self.inner.local.open.lock();
        let Some(trx) = open.get(&trx_id).cloned() else { return Status::Ok };
        let mut b = trx.body.lock();
        if !b.streaming {
            open.remove(&trx_id);
        }
        drop(open);
        if b.seqno >= 0 {
            self.inner.commit.leave(b.seqno);
            self.inner.apply.leave(b.seqno);
            if b.passed && b.flags & flags::TRX_END != 0 {
                Stats::add(&self.inner.stats.local_commits, 1);
                if let Some(since) = b.certifying_since {
                    self.inner.stats.commit_latency.observe(since.elapsed());
                }
            }
        }
        if b.streaming {
            // Only the fragment ends: the next one starts from nothing.
            let keep = TrxBody { seqno: SEQNO_UNDEFINED, streaming: true, conn_id: b.conn_id, ..TrxBody::default() };
            *b = keep;
        }
        Status::Ok
    }

    /// Rolls back a streaming transaction on every node: a rollback
    /// fragment, ordered like any write-set and applied by every node's
    /// appliers, this one's too (the server turned the client into an
    /// applier that waits for it). A fragment of it that was ordered but
    /// never stored (it failed certification, or the transaction was
    /// aborted meanwhile) is given up here: the server will not commit it.
    pub fn rollback_stream(&self, trx_id: u64) -> Status {
        let conn_id = match self.known_trx(trx_id) {
            Some(trx) => {
                let mut b = trx.body.lock();
                if b.seqno >= 0 {
                    self.inner.commit.leave(b.seqno);
                    self.inner.apply.leave(b.seqno);
                    b.seqno = SEQNO_UNDEFINED;
                }
                b.streaming = false;
                b.conn_id
            }
            // Not ours (any more): the rollback is still sent, and a node
            // that has no such transaction takes it as an empty event.
            None => 0,
        };
        let ws = self.write_set(trx_id, conn_id, flags::ROLLBACK | flags::PA_UNSAFE, Vec::new(), Vec::new());
        match self.replicate_write_set(ws).0 {
            Ok((seqno, _)) => {
                log::debug!("Streaming transaction {trx_id} rolled back at seqno {seqno}");
                Status::Ok
            }
            Err(status) => status,
        }
    }

    /// A BF aborter (applier with `bf_seqno`) wants `victim` out of its way.
    pub fn abort_certification(&self, bf_seqno: Seqno, victim: u64) -> (Status, Seqno) {
        let Some(trx) = self.known_trx(victim) else {
            // A transaction that has written nothing yet (it only holds row
            // locks, e.g. from SELECT ... FOR UPDATE): the server asks once,
            // for an active transaction, and rolls it back. The server's own
            // wsrep_local_bf_aborts counts it too; our metric agrees with it.
            Stats::add(&self.inner.stats.local_bf_aborts, 1);
            return (Status::Ok, SEQNO_UNDEFINED);
        };
        let (seqno, commits) = trx.ordered_at();
        if seqno >= 0 && seqno < bf_seqno && commits {
            // Ordered before the aborter: it commits first, the aborter waits.
            return (Status::NotAllowed, seqno);
        }
        // A streaming transaction's fragment ordered first is not enough: the
        // transaction goes on holding its locks after it, so the aborter
        // would wait for all of it (Galera aborts it too; its rollback
        // fragment undoes what was replicated).
        if !trx.aborted.swap(true, Ordering::AcqRel) {
            Stats::add(&self.inner.stats.local_bf_aborts, 1);
        }
        self.inner.commit.interrupt();
        self.inner.apply.interrupt();
        self.inner.flow.wake_all();
        (Status::Ok, seqno)
    }

    /// Re-applies an ordered local transaction that a BF abort rolled back.
    pub fn replay(&self, trx_id: u64, recv_ctx: usize) -> Status {
        let Some(trx) = self.known_trx(trx_id) else { return Status::TrxMissing };
        trx.aborted.store(false, Ordering::Release);
        let b = trx.body.lock();
        if b.seqno < 0 || !b.passed {
            return Status::TrxFail;
        }
        if self.wait_in_order(&self.inner.apply, b.seqno, b.depends_on, None).is_err() {
            return Status::TrxFail; // never its turn here: the node left
        }
        let job = ApplyJob {
            trx_id,
            conn_id: b.conn_id,
            source: self.node_id(),
            flags: b.flags,
            data: &b.data,
            gtid: Gtid { uuid: self.inner.core.lock().group_uuid(), seqno: b.seqno },
            depends_on: b.depends_on,
            opaque: TRACKED,
        };
        let Applied { ok, .. } = self.inner.app.apply(recv_ctx, &job);
        Stats::add(&self.inner.stats.local_replays, 1);
        if ok {
            Status::Ok
        } else {
            Status::TrxFail
        }
    }

    /// Total order isolation: replicate the statement, then hold the commit
    /// order until `to_execute_end` so it runs alone.
    pub fn to_execute_start(
        &self,
        conn_id: u64,
        keys: Vec<Vec<Vec<u8>>>,
        data: Vec<u8>,
        trx_flags: u32,
    ) -> (Status, Ordered) {
        let keys = keys.into_iter().map(|parts| Key { parts, kind: KeyType::Exclusive }).collect();
        if let Err(status) = self.wait_for_flow_control(None) {
            return (status, Ordered::NONE);
        }
        let ws = self.write_set(0, conn_id, trx_flags | flags::ISOLATION, keys, data);
        let (seqno, verdict) = match self.replicate_write_set(ws).0 {
            Ok(r) => r,
            Err(status) => return (status, Ordered::NONE),
        };
        let ordered = self.ordered(seqno, &verdict);
        self.inner.local.toi.lock().insert(conn_id, seqno);
        if verdict == Verdict::Fail {
            return (Status::TrxFail, ordered);
        }
        let inner = &self.inner;
        let turn = self.wait_in_order(&inner.apply, seqno, seqno - 1, None);
        if turn.and_then(|()| self.wait_in_order(&inner.commit, seqno, seqno - 1, None)).is_err() {
            // The node left before what precedes the statement was applied:
            // it does not run here (the next start brings it by IST).
            inner.local.toi.lock().remove(&conn_id);
            return (Status::ConnFail, ordered);
        }
        (Status::Ok, ordered)
    }

    pub fn to_execute_end(&self, conn_id: u64, error: &[u8]) -> Status {
        let Some(seqno) = self.inner.local.toi.lock().remove(&conn_id) else { return Status::TrxMissing };
        // Usually a user error that every node hit the same way (CREATE of an
        // existing table): the vote agrees and nothing else happens. A lost
        // vote still ends the statement with Ok, as in Galera: the client
        // already has the statement's own error, the node is leaving (the
        // vote logged why), and an error here would only add the server's
        // "TO isolation end failed" warning (MTR MDEV-37991, MDEV-38201).
        if !error.is_empty() {
            let _ = self.vote_on_failure(seqno, error, "Failed to execute TOI action");
        }
        self.inner.commit.leave(seqno);
        self.inner.apply.leave(seqno);
        Status::Ok
    }

    /// Causal read: wait until everything ordered cluster-wide before now is
    /// committed here (`upto == None`), or until `upto` is committed.
    pub fn sync_wait(&self, upto: Option<Gtid>, timeout: Option<Duration>) -> Result<Gtid, Status> {
        let timeout = timeout.unwrap_or_else(|| self.inner.hot.causal_read_timeout());
        let deadline = Instant::now() + timeout;
        let target = match upto {
            Some(g) => g.seqno,
            None => self.causal_point(deadline)?,
        };
        Stats::add(&self.inner.stats.causal_reads, upto.is_none() as u64);
        let left = deadline.saturating_duration_since(Instant::now());
        match self.inner.apply.wait_left(target, Some(left)) {
            Ok(()) => Ok(self.last_committed()),
            Err(Interrupted::TimedOut) | Err(Interrupted::Aborted) => Err(Status::TrxFail),
            Err(Interrupted::Closed) => Err(Status::ConnFail),
        }
    }

    /// The seqno a causal read starting now must see committed: everything
    /// the group ordered before now. The group's read barrier finds it
    /// without ordering anything (no log entry per read): once it returns,
    /// this member was handed every such write-set, so the last seqno it was
    /// handed covers them. A barrier that fails while the group changes
    /// leader is tried again until the deadline.
    fn causal_point(&self, deadline: Instant) -> Result<Seqno, Status> {
        let group = self.group().ok_or(Status::ConnFail)?;
        // The group retries transient failures up to the deadline itself
        // (see `GroupChannel::read_barrier`).
        match group.read_barrier(deadline.saturating_duration_since(Instant::now())) {
            Ok(()) => Ok(self.inner.core.lock().last_ordered()),
            Err(GroupError::NonPrimary | GroupError::Closed) => Err(Status::ConnFail),
            Err(e) => {
                log::warn!("Causal read: no read barrier before the timeout: {e}");
                Err(Status::TrxFail)
            }
        }
    }

    pub fn last_committed(&self) -> Gtid {
        Gtid { uuid: self.inner.core.lock().group_uuid(), seqno: self.inner.apply.last_left() }
    }

    /// Stops committing after the last ordered seqno and waits for everything
    /// up to it; returns that seqno.
    pub fn pause(&self) -> Seqno {
        let at = self.inner.core.lock().last_ordered();
        self.inner.commit.pause(at);
        self.inner.apply.pause(at);
        let started = Instant::now();
        let _ = self.inner.apply.wait_left(at, None);
        log::info!("Provider paused at seqno {at} (drained in {:?})", started.elapsed());
        at
    }

    pub fn resume(&self) {
        self.inner.commit.resume();
        self.inner.apply.resume();
        log::info!("Provider resumed");
    }

    pub fn desync(&self) -> Status {
        let (commands, desyncs) = {
            let mut core = self.inner.core.lock();
            (core.desync(), core.desyncs())
        };
        self.inner.stats.desync_count.store(desyncs as i64, Ordering::Relaxed);
        self.execute(commands);
        Status::Ok
    }

    pub fn resync(&self) -> Status {
        let (commands, desyncs) = {
            let mut core = self.inner.core.lock();
            (core.resync(), core.desyncs())
        };
        self.inner.stats.desync_count.store(desyncs as i64, Ordering::Relaxed);
        self.execute(commands);
        Status::Ok
    }
}

/// A write-set larger than the group replicates in one piece: what a DBA
/// can do about it, as Galera names `repl.max_ws_size`.
fn warn_beyond_group_limit(bytes: usize) {
    log::warn!(
        "Maximum writeset size exceeded: {bytes} bytes; Tandem replicates at most {} bytes in one write-set. Split the \
         transaction, or replicate it in fragments (wsrep_trx_fragment_size)",
        tandem_group::MAX_PAYLOAD_BYTES
    );
}
