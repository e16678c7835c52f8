//! Causal readers: one per node, each noting the last transaction every
//! watched client (on other nodes) was told of, then reading causally on
//! its own node (`sync_wait`, `wsrep_sync_wait=1`); once the read may go
//! on, its server must hold every transaction noted.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::world::HOSTS;
use super::writer::Writer;
use crate::common::FakeServer;

pub struct Reader {
    host: usize,
    stop: AtomicBool,
    /// Reads that went on (the others timed out or found the node out of
    /// the primary component, as a client's would).
    reads: AtomicUsize,
    /// The first stale read, if any.
    stale: Mutex<Option<String>>,
    thread: Mutex<Option<thread::JoinHandle<()>>>,
}

impl Reader {
    /// A reader on `server` (the node on `host`) watching `writers`.
    pub fn start(server: &Arc<FakeServer>, host: usize, writers: Vec<Arc<Writer>>) -> Arc<Reader> {
        let reader = Arc::new(Reader {
            host,
            stop: AtomicBool::new(false),
            reads: AtomicUsize::new(0),
            stale: Mutex::new(None),
            thread: Mutex::new(None),
        });
        let (server, r) = (server.clone(), reader.clone());
        *reader.thread.lock().unwrap() = Some(thread::spawn(move || read(server, r, writers)));
        reader
    }

    /// Stops the reader, waits for it, and says whether it read anything
    /// stale, or nothing at all (then it proved nothing).
    pub fn finish(&self) -> Result<usize, String> {
        self.stop.store(true, Ordering::Release);
        let thread = self.thread.lock().unwrap().take();
        if let Some(t) = thread {
            t.join().map_err(|_| format!("the reader on {} panicked", HOSTS[self.host]))?;
        }
        let stale = self.stale.lock().unwrap().clone();
        if let Some(stale) = stale {
            return Err(stale);
        }
        match self.reads.load(Ordering::Acquire) {
            0 => Err(format!("the reader on {} had no read go on", HOSTS[self.host])),
            n => Ok(n),
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

fn read(server: Arc<FakeServer>, reader: Arc<Reader>, writers: Vec<Arc<Writer>>) {
    while !reader.stop.load(Ordering::Acquire) {
        let noted: Vec<(u8, u64)> = writers.iter().filter_map(|w| w.last_acked().map(|t| (w.row, t))).collect();
        if server.node().sync_wait(None, Some(Duration::from_secs(5))).is_ok() {
            let commits = server.commits.lock();
            let missing = noted.iter().find(|(_, trx)| !commits.iter().rev().any(|c| c.trx_id == *trx));
            if let Some((row, trx)) = missing {
                let last = commits.last().map(|c| c.seqno);
                let stale = format!(
                    "a causal read on {} went on without transaction {trx:#x} (row {row}), acknowledged before it \
                     began; the node had committed up to seqno {last:?}",
                    HOSTS[reader.host]
                );
                reader.stale.lock().unwrap().get_or_insert(stale);
            }
            drop(commits);
            reader.reads.fetch_add(1, Ordering::AcqRel);
        }
        thread::sleep(Duration::from_millis(10));
    }
}
