//! openraft's network, over the group transport.
//!
//! Every openraft RPC becomes one [`Request`] frame. Transport failures map to
//! openraft errors so that it backs off from dead peers (`Unreachable`) and
//! retries at once after a broken connection (`Network`).

use std::sync::Arc;
use std::time::Duration;

use openraft::errors::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest, TransferLeaderResponse,
    VoteRequest, VoteResponse,
};
use openraft::EntryPayload;

use super::types::{Entry, GroupTypes, LogId, Snapshot, Vote};
use crate::transport::{CallError, NetCtx};
use crate::wire::{Request, Response, APPEND_BUDGET_BYTES};
use crate::{MemberId, MemberInfo};

type RpcError = RPCError<GroupTypes>;

pub struct Network {
    net: Arc<NetCtx>,
    /// openraft asks for appends to finish within one heartbeat interval; a
    /// loaded 2-core box cannot promise that for big batches, so allow at
    /// least this much before calling a connection dead.
    rpc_floor: Duration,
}

impl Network {
    pub fn new(net: Arc<NetCtx>, rpc_floor: Duration) -> Self {
        Network { net, rpc_floor }
    }
}

impl RaftNetworkFactory<GroupTypes> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: MemberId, node: &MemberInfo) -> PeerClient {
        PeerClient { net: self.net.clone(), target, addr: node.group_addr.clone(), rpc_floor: self.rpc_floor }
    }
}

pub struct PeerClient {
    net: Arc<NetCtx>,
    target: MemberId,
    addr: String,
    rpc_floor: Duration,
}

impl PeerClient {
    async fn call(&self, req: Request, ttl: Duration) -> Result<Response, RpcError> {
        let timeout = ttl.max(self.rpc_floor);
        match self.net.call(&self.addr, Some(self.target), &req, timeout).await {
            Ok((_, Response::Failed { reason })) => Err(unreachable(reason)),
            Ok((_, resp)) => Ok(resp),
            Err(CallError::Lost(e)) => Err(RPCError::Network(NetworkError::from_string(e))),
            Err(e) => Err(unreachable(e)),
        }
    }
}

fn unreachable(e: impl ToString) -> RpcError {
    RPCError::Unreachable(Unreachable::from_string(e))
}

fn unexpected(what: &str) -> RpcError {
    unreachable(format!("peer sent an unexpected answer to {what}"))
}

/// Rough encoded size of an entry, to keep a batch under the frame limit.
/// Membership entries are small; the over-estimate is harmless.
fn entry_size(e: &Entry) -> usize {
    match &e.payload {
        EntryPayload::Normal(p) => p.bytes.0.len() + 64,
        _ => 64 * 1024,
    }
}

/// Drops the tail of a batch that would not fit in one frame. Returns the last
/// log id kept when something was dropped: openraft then gets a partial
/// success and sends the rest in the next request.
fn fit_to_budget(rpc: &mut AppendEntriesRequest<GroupTypes>) -> Option<LogId> {
    let mut total = 0;
    let keep = rpc.entries.iter().position(|e| {
        total += entry_size(e);
        total > APPEND_BUDGET_BYTES
    });
    match keep {
        // Always send at least one entry; `submit` bounds a single payload.
        Some(cut) if cut > 0 => {
            rpc.entries.truncate(cut);
            rpc.entries.last().map(|e| e.log_id)
        }
        _ => None,
    }
}

impl RaftNetworkV2<GroupTypes> for PeerClient {
    type SnapshotData = Vec<u8>;

    async fn append_entries(
        &mut self,
        mut rpc: AppendEntriesRequest<GroupTypes>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<GroupTypes>, RpcError> {
        let cut = fit_to_budget(&mut rpc);
        match self.call(Request::AppendEntries(rpc), option.hard_ttl()).await? {
            Response::AppendEntries(AppendEntriesResponse::Success) if cut.is_some() => {
                Ok(AppendEntriesResponse::PartialSuccess(cut))
            }
            Response::AppendEntries(resp) => Ok(resp),
            _ => Err(unexpected("append-entries")),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<GroupTypes>,
        option: RPCOption,
    ) -> Result<VoteResponse<GroupTypes>, RpcError> {
        match self.call(Request::Vote(rpc), option.hard_ttl()).await? {
            Response::Vote(resp) => Ok(resp),
            _ => Err(unexpected("vote")),
        }
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<GroupTypes>,
        option: RPCOption,
    ) -> Result<VoteResponse<GroupTypes>, RpcError> {
        match self.call(Request::PreVote(rpc), option.hard_ttl()).await? {
            Response::Vote(resp) => Ok(resp),
            _ => Err(unexpected("pre-vote")),
        }
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl std::future::Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<GroupTypes>, StreamingError<GroupTypes>> {
        let req = Request::Snapshot { vote, meta: snapshot.meta, data: snapshot.snapshot };
        tokio::select! {
            biased;
            closed = cancel => Err(StreamingError::Closed(closed)),
            resp = self.call(req, option.hard_ttl()) => match resp? {
                Response::Snapshot(resp) => Ok(resp),
                _ => Err(unexpected("snapshot").into()),
            },
        }
    }

    async fn transfer_leader(
        &mut self,
        req: TransferLeaderRequest<GroupTypes>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<GroupTypes>, RpcError> {
        match self.call(Request::TransferLeader(req), option.hard_ttl()).await? {
            Response::TransferLeader(resp) => Ok(resp),
            _ => Err(unexpected("transfer-leader")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::types::{AppPayload, Bytes};

    fn entry(index: u64, len: usize) -> Entry {
        let payload = AppPayload { origin: 1, bytes: Bytes::from(vec![0u8; len]) };
        let leader = openraft::impls::leader_id_adv::LeaderId { term: 1, node_id: 1 };
        Entry { log_id: LogId::new(leader, index), payload: EntryPayload::Normal(payload) }
    }

    fn request(entries: Vec<Entry>) -> AppendEntriesRequest<GroupTypes> {
        AppendEntriesRequest { vote: Vote::new(1, 1), prev_log_id: None, entries, leader_commit: None }
    }

    #[test]
    fn small_batches_are_sent_whole() {
        let mut rpc = request((1..=300).map(|i| entry(i, 1000)).collect());
        assert_eq!(fit_to_budget(&mut rpc), None);
        assert_eq!(rpc.entries.len(), 300);
    }

    #[test]
    fn large_batches_are_cut_to_the_frame_budget() {
        let big = 20 << 20;
        let mut rpc = request((1..=5).map(|i| entry(i, big)).collect());
        let last = fit_to_budget(&mut rpc).expect("cut");
        assert_eq!(rpc.entries.len(), 2);
        assert_eq!(last.index, 2);
        let frame = crate::wire::encode_frame(&Request::AppendEntries(rpc)).expect("fits in a frame");
        assert!(frame.len() <= crate::wire::MAX_FRAME_BYTES);
    }

    #[test]
    fn a_single_oversized_entry_still_goes() {
        let mut rpc = request(vec![entry(1, 50 << 20)]);
        assert_eq!(fit_to_budget(&mut rpc), None);
        assert_eq!(rpc.entries.len(), 1);
    }
}
