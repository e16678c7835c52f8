//! Requests pipelined on one link: each written as it comes, without
//! waiting for the answer to the one before, and the answers read back in
//! order. The peer serves a link's requests one at a time, in the order
//! they arrive (`server::serve_conn`), so the answers come in that order.
//!
//! openraft's replication uses it for appends: while one batch is on its way
//! to a follower, the next one, or the leader's newer commit index alone,
//! follows it at once instead of a round trip later. Across a WAN that is
//! the difference between a remote member applying its own write-set one
//! round trip after sending it and two: the leader commits once a majority
//! has the entry, but the remote follower only learns so from the next
//! request, which a link with one request in flight sends only after the
//! remote member's answer to the entry came back.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{CallError, Conn, NetCtx};
use crate::wire::{self, Response};
use crate::MemberId;

/// A frame to write, or why the request could not be encoded (answered as
/// an error in its turn, and the pipeline ends there).
pub type PipelinedFrame = Result<Vec<u8>, String>;

impl NetCtx {
    /// Writes each of `frames` to one link to member `expect` at `addr` as
    /// it comes, and sends each answer to `answers` in order, every one
    /// within `timeout` of being awaited. The first failure is sent as the
    /// last answer. The link goes back to the pool once `frames` closed and
    /// every answer was read; one that failed, or that was abandoned with
    /// answers outstanding, is closed.
    pub async fn pipeline(
        &self,
        addr: &str,
        expect: MemberId,
        mut frames: mpsc::Receiver<PipelinedFrame>,
        answers: mpsc::Sender<Result<Response, CallError>>,
        timeout: Duration,
    ) {
        if self.isolated() {
            let _ = answers.send(Err(CallError::Unreachable("this member is isolated (gmcast.isolate)".into()))).await;
            return;
        }
        let conn = match tokio::time::timeout(timeout, self.checkout(addr, Some(expect))).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return drop(answers.send(Err(e)).await),
            Err(_) => {
                let e = CallError::Unreachable(format!("no connection to {addr} within {timeout:?}"));
                return drop(answers.send(Err(e)).await);
            }
        };
        let Conn { stream, peer, group, open, epoch } = conn;
        let (mut reader, mut writer) = tokio::io::split(stream);
        // One token per request written, with when it was: the reader reads
        // that many answers, and times each one (`round_trips`).
        let (written, mut to_read) = mpsc::unbounded_channel::<Result<Instant, String>>();
        let write = async {
            while let Some(frame) = frames.recv().await {
                // `gmcast.isolate` cuts a link in use too: nothing more goes out on it.
                let isolated = self.isolated() || epoch != self.isolations.load(Ordering::Acquire);
                let sent = match frame {
                    _ if isolated => Err("this member is isolated (gmcast.isolate)".to_string()),
                    Ok(frame) => {
                        let wrote = writer.write_all(&frame).await.and(writer.flush().await);
                        wrote.map(|()| Instant::now()).map_err(|e| e.to_string())
                    }
                    Err(e) => Err(e),
                };
                let failed = sent.is_err();
                if written.send(sent).is_err() || failed {
                    return false;
                }
            }
            drop(written);
            true
        };
        let read = async {
            while let Some(sent) = to_read.recv().await {
                let answer = match sent {
                    Err(e) => Err(CallError::Unreachable(e)),
                    Ok(at) => self.read_answer(&mut reader, addr, peer, at, timeout).await,
                };
                let ok = answer.is_ok();
                if matches!(&answer, Ok(resp) if !matches!(resp, Response::Failed { .. })) {
                    self.liveness.heard(peer);
                }
                if answers.send(answer).await.is_err() || !ok {
                    return false;
                }
            }
            true
        };
        let (wrote_all, read_all) = tokio::join!(write, read);
        if wrote_all && read_all {
            let stream = reader.unsplit(writer);
            self.checkin(addr, Conn { stream, peer, group, open, epoch });
        }
    }

    /// The answer to a request written at `at`, timed (`round_trips`).
    async fn read_answer<R: tokio::io::AsyncRead + Unpin>(
        &self,
        reader: &mut R,
        addr: &str,
        peer: MemberId,
        at: Instant,
        timeout: Duration,
    ) -> Result<Response, CallError> {
        match tokio::time::timeout(timeout, wire::read_frame::<_, Response>(reader)).await {
            Ok(Ok(resp)) => {
                self.round_trips.record(peer, at.elapsed());
                Ok(resp)
            }
            Ok(Err(e)) => Err(CallError::Lost(format!("{addr}: {e}"))),
            Err(_) => Err(CallError::Lost(format!("{addr}: no answer within {timeout:?}"))),
        }
    }
}
