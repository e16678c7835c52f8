//! openraft's runtime for the group: tokio's, as openraft's own
//! `TokioRuntime`, except for its random draws (the election timeouts),
//! which come from `crate::entropy`: from the OS, or from a simulation's
//! seed (docs/simulation.md). openraft-rt's `DeterministicRng` does the
//! second only, and panics outside a seeded scope, so it cannot serve
//! production too.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use openraft::{AsyncRuntime, OptionalSend, TokioRuntime};

use crate::entropy;

type Tokio = TokioRuntime;

#[derive(Debug)]
pub struct GroupRuntime(Tokio);

/// openraft's random source: `crate::entropy`.
pub struct GroupRng;

impl rand_core_10::TryRng for GroupRng {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(entropy::next_u64() as u32)
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(entropy::next_u64())
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        entropy::fill_bytes(dst);
        Ok(())
    }
}

impl AsyncRuntime for GroupRuntime {
    type JoinError = <Tokio as AsyncRuntime>::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = <Tokio as AsyncRuntime>::JoinHandle<T>;
    type Sleep = <Tokio as AsyncRuntime>::Sleep;
    type Instant = <Tokio as AsyncRuntime>::Instant;
    type TimeoutError = <Tokio as AsyncRuntime>::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = <Tokio as AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = GroupRng;
    type Mpsc = <Tokio as AsyncRuntime>::Mpsc;
    type Watch = <Tokio as AsyncRuntime>::Watch;
    type Oneshot = <Tokio as AsyncRuntime>::Oneshot;
    type Mutex<T: OptionalSend + 'static> = <Tokio as AsyncRuntime>::Mutex<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        Tokio::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        Tokio::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        Tokio::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(duration: Duration, future: F) -> Self::Timeout<R, F> {
        Tokio::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(deadline: Self::Instant, future: F) -> Self::Timeout<R, F> {
        Tokio::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        Tokio::is_panic(join_error)
    }

    fn thread_rng() -> GroupRng {
        GroupRng
    }

    fn new(threads: usize) -> Self {
        GroupRuntime(Tokio::new(threads))
    }

    fn block_on<F, T>(&mut self, future: F) -> T
    where
        F: Future<Output = T>,
    {
        self.0.block_on(future)
    }
}
