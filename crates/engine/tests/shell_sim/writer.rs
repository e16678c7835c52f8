//! Clients: each running one kind of work on rows of its own until told
//! to stop, and noting what was acknowledged, in the order it was: one-row
//! transactions, statements in total order isolation (TOI), or streaming
//! transactions of two fragments and a commit.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use tandem_engine::client::{Status, TRACKED};
use tandem_engine::writeset::{flags, KeyType};

use crate::common::{transact, FakeServer};

/// What a client runs, and on which of its node's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// One-row transactions on row `host`.
    Rows,
    /// Statements in total order isolation on row `10 + host`.
    Toi,
    /// Streaming transactions on row `20 + host`.
    Streams,
}

impl Work {
    pub fn row(self, host: usize) -> u8 {
        host as u8
            + match self {
                Work::Rows => 0,
                Work::Toi => 10,
                Work::Streams => 20,
            }
    }
}

pub struct Writer {
    pub row: u8,
    pub work: Work,
    /// Transaction ids: `row << 48 | incarnation << 32 | n`.
    first_trx: u64,
    stop: AtomicBool,
    /// Set when the writer's node dies: what completes after it does not
    /// count (the client's connection died with the server).
    killed: AtomicBool,
    acked: Mutex<Vec<u64>>,
    thread: Mutex<Option<thread::JoinHandle<()>>>,
}

impl Writer {
    /// Starts a writer of `work` on `server`, the node on `host`.
    pub fn start(server: &Arc<FakeServer>, host: usize, work: Work, incarnation: u16) -> Arc<Writer> {
        let row = work.row(host);
        let writer = Arc::new(Writer {
            row,
            work,
            first_trx: (u64::from(row) << 48) | (u64::from(incarnation) << 32),
            stop: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            acked: Mutex::new(vec![]),
            thread: Mutex::new(None),
        });
        let (server, w) = (server.clone(), writer.clone());
        *writer.thread.lock().unwrap() = Some(thread::spawn(move || write(server, w)));
        writer
    }

    /// A client that was told of `acked` and runs no more: what the
    /// checkers' own tests feed them.
    pub fn recorded(row: u8, acked: Vec<u64>) -> Arc<Writer> {
        Arc::new(Writer {
            row,
            work: Work::Rows,
            first_trx: 0,
            stop: AtomicBool::new(true),
            killed: AtomicBool::new(false),
            acked: Mutex::new(acked),
            thread: Mutex::new(None),
        })
    }

    /// Transactions acknowledged so far.
    pub fn acked(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    /// The last transaction acknowledged, if any.
    pub fn last_acked(&self) -> Option<u64> {
        self.acked.lock().unwrap().last().copied()
    }

    /// Their ids, in the order they were acknowledged.
    pub fn acked_ids(&self) -> Vec<u64> {
        self.acked.lock().unwrap().clone()
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    /// The writer's node died: nothing it is told from now on counts.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.stop();
    }

    pub fn finished(&self) -> bool {
        self.thread.lock().unwrap().as_ref().is_none_or(|t| t.is_finished())
    }
}

fn write(server: Arc<FakeServer>, writer: Arc<Writer>) {
    let mut trx_id = writer.first_trx;
    while !writer.stop.load(Ordering::Acquire) {
        trx_id += 1;
        let status = match writer.work {
            Work::Rows => transact(&server, trx_id, writer.row, 1),
            Work::Toi => statement(&server, trx_id, writer.row),
            Work::Streams => stream(&server, trx_id, writer.row),
        };
        // Checked after the commit: an acknowledgement that counts was
        // committed before the node died, so before its data was taken.
        if status == Status::Ok && !writer.killed.load(Ordering::Acquire) {
            writer.acked.lock().unwrap().push(trx_id);
        } else if status != Status::Ok {
            // Not primary, or stopping: a client would try again later.
            thread::sleep(Duration::from_millis(5));
        }
    }
}

fn row_key(row: u8) -> Vec<Vec<u8>> {
    vec![b"db".to_vec(), b"t".to_vec(), vec![row]]
}

/// A statement in total order isolation on connection `conn_id`, adding 1
/// to `row`: it runs while the node holds the commit order for it.
fn statement(server: &FakeServer, conn_id: u64, row: u8) -> Status {
    let node = server.node();
    let (status, ordered) =
        node.to_execute_start(conn_id, vec![row_key(row)], vec![row, 1], flags::TRX_START | flags::TRX_END);
    if status == Status::Ok {
        server.record(ordered.gtid.seqno, conn_id, &[row, 1]);
        node.to_execute_end(conn_id, &[]);
    }
    status
}

/// A streaming transaction: two fragments adding 1 to `row` each, then
/// the commit fragment; rolled back on every node if a fragment fails, as
/// wsrep-lib does.
fn stream(server: &FakeServer, trx_id: u64, row: u8) -> Status {
    let node = server.node();
    for first in [true, false] {
        node.append_key(trx_id, row_key(row), KeyType::Exclusive);
        node.append_data(trx_id, &[row, 1]);
        let (status, ordered) = node.certify(1, trx_id, if first { flags::TRX_START } else { 0 });
        if status != Status::Ok {
            node.rollback_stream(trx_id);
            node.release(trx_id, TRACKED);
            return status;
        }
        node.commit_order_enter(trx_id, TRACKED, ordered.gtid.seqno);
        node.commit_order_leave(ordered.gtid.seqno, &[]);
        node.release(trx_id, TRACKED);
    }
    node.append_key(trx_id, vec![b"db".to_vec(), b"t".to_vec()], KeyType::Shared);
    let (status, ordered) = node.certify(1, trx_id, flags::TRX_END | flags::PA_UNSAFE);
    if status == Status::Ok {
        server.write(ordered.gtid.seqno, trx_id, TRACKED, &[row, 1, row, 1]);
    } else {
        node.rollback_stream(trx_id);
    }
    node.release(trx_id, TRACKED);
    status
}

/// Every writer's acknowledged transactions, together.
pub fn acked(writers: &[Arc<Writer>]) -> usize {
    writers.iter().map(|w| w.acked()).sum()
}
