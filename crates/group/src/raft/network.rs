//! openraft's network, over the group transport.
//!
//! Every openraft RPC becomes one [`Request`] frame. Transport failures map to
//! openraft errors so that it backs off from dead peers (`Unreachable`) and
//! retries at once after a broken connection (`Network`). Appends to a
//! follower are pipelined on one link ([`crate::transport::pipeline`]):
//! the next batch, or a newer commit index, goes out without waiting for
//! the answer to the one before.

use std::sync::Arc;
use std::time::Duration;

use openraft::base::{BoxFuture, BoxStream};
use openraft::errors::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::StreamAppendResult;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest, TransferLeaderResponse,
    VoteRequest, VoteResponse,
};
use openraft::{EntryPayload, OptionalSend};
use tokio::sync::mpsc;

use super::types::{Entry, GroupTypes, LogId, Snapshot, Vote};
use crate::transport::pipeline::PipelinedFrame;
use crate::transport::{CallError, NetCtx};
use crate::wire::{self, Request, Response, APPEND_BUDGET_BYTES};
use crate::{MemberId, MemberInfo};

type RpcError = RPCError<GroupTypes>;

/// Requests waiting for the link, and answers waiting for openraft, per
/// follower. What is written and not yet answered is bounded by the link
/// itself (the peer reads a request only after answering the one before,
/// so TCP's buffers fill and the writes wait), not by this.
const PIPELINE_DEPTH: usize = 16;

/// The log range a request covers (`prev`, and its last entry or `prev`),
/// and where `fit_to_budget` cut it, if it did.
struct Sent {
    prev: Option<LogId>,
    last: Option<LogId>,
    cut: Option<LogId>,
}

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

/// Encodes openraft's requests into `frames`, each recorded in `sent` first.
/// Ends after a request `fit_to_budget` cut: the next one would start past
/// what the follower got, and openraft starts a new stream from the partial
/// success instead.
async fn feed<S>(mut input: S, frames: mpsc::Sender<PipelinedFrame>, sent: mpsc::UnboundedSender<Sent>)
where
    S: futures_util::Stream<Item = AppendEntriesRequest<GroupTypes>> + Unpin,
{
    use futures_util::StreamExt;
    while let Some(mut rpc) = input.next().await {
        let prev = rpc.prev_log_id;
        let last = rpc.entries.last().map(|e| e.log_id).or(prev);
        let cut = fit_to_budget(&mut rpc);
        let frame = wire::encode_request(&Request::AppendEntries(rpc)).map_err(|e| e.to_string());
        let failed = frame.is_err();
        if sent.send(Sent { prev, last, cut }).is_err() || frames.send(frame).await.is_err() || failed || cut.is_some()
        {
            return;
        }
    }
}

/// One answer as openraft's stream wants it, and whether the stream ends
/// with it (an error, a conflict, a higher vote, a partial success).
fn stream_result(
    answer: Result<Response, CallError>,
    request: Sent,
) -> (Result<StreamAppendResult<GroupTypes>, RpcError>, bool) {
    match answer {
        Ok(Response::AppendEntries(resp)) => {
            let resp = match (resp, request.cut) {
                (AppendEntriesResponse::Success, Some(cut)) => AppendEntriesResponse::PartialSuccess(Some(cut)),
                (resp, _) => resp,
            };
            let partial = match &resp {
                AppendEntriesResponse::PartialSuccess(upto) => Some(*upto),
                _ => None,
            };
            let result = resp.into_stream_result(request.prev, request.last);
            let ended = result.is_err() || partial.is_some_and(|p| p != request.last);
            (Ok(result), ended)
        }
        Ok(Response::Failed { reason }) => (Err(unreachable(reason)), true),
        Ok(_) => (Err(unexpected("append-entries")), true),
        Err(CallError::Lost(e)) => (Err(RPCError::Network(NetworkError::from_string(e))), true),
        Err(e) => (Err(unreachable(e)), true),
    }
}

/// Ends the pipeline's task when openraft drops the stream of answers.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
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

    fn stream_append<'s, S>(
        &'s mut self,
        input: S,
        option: RPCOption,
    ) -> BoxFuture<'s, Result<BoxStream<'s, Result<StreamAppendResult<GroupTypes>, RpcError>>, RpcError>>
    where
        S: futures_util::Stream<Item = AppendEntriesRequest<GroupTypes>> + OptionalSend + Unpin + 'static,
    {
        let (net, addr, target) = (self.net.clone(), self.addr.clone(), self.target);
        let timeout = option.hard_ttl().max(self.rpc_floor);
        Box::pin(async move {
            let (frames, frames_rx) = mpsc::channel(PIPELINE_DEPTH);
            let (answers_tx, answers) = mpsc::channel(PIPELINE_DEPTH);
            let (sent_tx, sent) = mpsc::unbounded_channel();
            let task = tokio::spawn(async move {
                let pipeline = net.pipeline(&addr, target, frames_rx, answers_tx, timeout);
                tokio::join!(feed(input, frames, sent_tx), pipeline);
            });
            let state = (answers, sent, AbortOnDrop(task), false);
            let results = futures_util::stream::unfold(state, |(mut answers, mut sent, task, ended)| async move {
                if ended {
                    return None;
                }
                let answer = answers.recv().await?;
                // Every answer is to a request `feed` recorded first.
                let request = sent.recv().await?;
                let (result, ended) = stream_result(answer, request);
                Some((result, (answers, sent, task, ended)))
            });
            let results: BoxStream<'s, _> = Box::pin(results);
            Ok(results)
        })
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

    fn log_id(index: u64) -> LogId {
        LogId::new(openraft::impls::leader_id_adv::LeaderId { term: 1, node_id: 1 }, index)
    }

    fn sent(prev: u64, last: u64, cut: Option<u64>) -> Sent {
        Sent { prev: Some(log_id(prev)), last: Some(log_id(last)), cut: cut.map(log_id) }
    }

    #[test]
    fn answers_go_on_until_one_ends_the_pipeline() {
        // A whole batch taken: its last entry is matched, and the next follows.
        let (result, ended) =
            stream_result(Ok(Response::AppendEntries(AppendEntriesResponse::Success)), sent(4, 9, None));
        assert_eq!(result.expect("no error").expect("taken"), Some(log_id(9)));
        assert!(!ended);
        // A batch cut to the frame budget: matched up to the cut, and the
        // stream ends (the next request would start past it).
        let (result, ended) =
            stream_result(Ok(Response::AppendEntries(AppendEntriesResponse::Success)), sent(4, 9, Some(6)));
        assert_eq!(result.expect("no error").expect("taken"), Some(log_id(6)));
        assert!(ended);
        // A conflict at the request's start ends it, for openraft to probe back.
        let (result, ended) =
            stream_result(Ok(Response::AppendEntries(AppendEntriesResponse::Conflict)), sent(4, 9, None));
        assert!(matches!(result, Ok(Err(openraft::raft::StreamAppendError::Conflict(c))) if c == log_id(4)));
        assert!(ended);
        // A peer that cannot take it, or a link that broke: openraft backs
        // off from the first and retries the second at once.
        let (result, ended) = stream_result(Ok(Response::Failed { reason: "stopping".into() }), sent(4, 9, None));
        assert!(matches!(result, Err(RPCError::Unreachable(_))) && ended);
        let (result, ended) = stream_result(Err(CallError::Lost("reset".into())), sent(4, 9, None));
        assert!(matches!(result, Err(RPCError::Network(_))) && ended);
        let (result, ended) = stream_result(Ok(Response::Done), sent(4, 9, None));
        assert!(matches!(result, Err(RPCError::Unreachable(_))) && ended);
    }
}
