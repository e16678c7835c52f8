//! In-memory Raft log and vote.
//!
//! Nothing is persisted: a restarted process is a new member with a fresh id
//! (see [`crate::MemberId`]), so durability would buy nothing and cost an fsync
//! per write-set. The log stays bounded because the snapshot policy purges
//! what a snapshot covers.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io;
use std::ops::RangeBounds;
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{IOFlushed, LogState, RaftLogStorage};
use openraft::RaftLogReader;

use super::types::{Entry, GroupTypes, LogId, Vote};

#[derive(Default)]
struct LogData {
    vote: Option<Vote>,
    committed: Option<LogId>,
    last_purged: Option<LogId>,
    entries: BTreeMap<u64, Entry>,
}

/// The log store; clones share the same log (openraft wants a separate reader).
#[derive(Clone, Default)]
pub struct MemLogStore {
    inner: Arc<Mutex<LogData>>,
}

impl MemLogStore {
    /// Critical sections are a few map operations, never an await, so a std
    /// mutex held on a tokio worker is fine here.
    fn data(&self) -> MutexGuard<'_, LogData> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl RaftLogReader<GroupTypes> for MemLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        let data = self.data();
        Ok(data.entries.range(range).map(|(_, e)| e.clone()).collect())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        Ok(self.data().vote)
    }
}

impl RaftLogStorage<GroupTypes> for MemLogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<GroupTypes>, io::Error> {
        let data = self.data();
        let last = data.entries.values().next_back().map(|e| e.log_id);
        Ok(LogState {
            last_purged_log_id: data.last_purged,
            last_log_id: last.or_else(|| data.last_purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        self.data().vote = Some(*vote);
        Ok(())
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        self.data().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        Ok(self.data().committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: IOFlushed<GroupTypes>,
    ) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        {
            let mut data = self.data();
            for entry in entries {
                data.entries.insert(entry.log_id.index, entry);
            }
        }
        // Memory is as durable as this store gets: the write is done.
        callback.io_completed(Ok(()));
        Ok(())
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        let mut data = self.data();
        match last_log_id {
            Some(keep) => {
                let _dropped = data.entries.split_off(&(keep.index + 1));
            }
            None => data.entries.clear(),
        }
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        let mut data = self.data();
        let kept = data.entries.split_off(&(log_id.index + 1));
        data.entries = kept;
        data.last_purged = Some(log_id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use openraft::testing::log::{StoreBuilder, Suite};
    use openraft::StorageError;

    use super::MemLogStore;
    use crate::raft::state_machine::StateMachine;
    use crate::raft::types::GroupTypes;
    use crate::{Connectivity, Ordered, Replica};

    struct NullReplica;

    impl Replica for NullReplica {
        fn apply(&mut self, _event: Ordered<'_>) {}
        fn snapshot(&self) -> Vec<u8> {
            Vec::new()
        }
        fn restore(&mut self, _snapshot: &[u8]) -> Result<(), String> {
            Ok(())
        }
        fn connectivity(&mut self, _now: Connectivity) {}
        fn position(&self) -> i64 {
            0
        }
    }

    struct Builder;

    impl StoreBuilder<GroupTypes, MemLogStore, StateMachine> for Builder {
        async fn build(&self) -> Result<((), MemLogStore, StateMachine), StorageError<GroupTypes>> {
            let replica: Box<dyn Replica> = Box::new(NullReplica);
            Ok((
                (),
                MemLogStore::default(),
                StateMachine::new(Arc::new(Mutex::new(replica))),
            ))
        }
    }

    /// openraft's own conformance suite for log stores and state machines.
    #[test]
    fn passes_the_openraft_storage_suite() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(Suite::test_all(Builder))
            .expect("storage suite");
    }
}
