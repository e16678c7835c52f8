//! The two ways into the order. On the leader, a caller's own thread hands
//! its payload to the Raft core when nothing waits in the submit queue; from
//! inside a runtime, or behind queued payloads, it goes through the queue.
//! Whichever way each payload takes, what one thread submits is ordered as
//! it submitted it, and nothing is lost or ordered twice.

mod common;

use std::collections::BTreeMap;

use common::*;
use tandem_group::GroupChannel;

fn payload(thread: usize, n: usize) -> Vec<u8> {
    format!("{thread}:{n}").into_bytes()
}

/// Each thread's payloads in the order they were applied.
fn per_thread(m: &Member) -> BTreeMap<usize, Vec<usize>> {
    let mut seen: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (_, p) in m.rec.messages() {
        let text = String::from_utf8(p).expect("a test payload");
        let (thread, n) = text.split_once(':').expect("thread:n");
        seen.entry(thread.parse().unwrap())
            .or_default()
            .push(n.parse().unwrap());
    }
    seen
}

/// A bootstrapped member whose replica never waits (so the group applies on
/// its worker), primary; the guard keeps the test alone.
fn leader(name: &str) -> (std::sync::MutexGuard<'static, ()>, Member) {
    let serial = serial();
    let m = bootstrap(name);
    m.rec.journal().never_waits = true;
    wait_primary(&m);
    (serial, m)
}

/// One thread alternates between the direct way (a plain thread) and the
/// queue (the same thread inside a runtime): a payload queued first must
/// not be overtaken by the next one handed over directly.
#[test]
fn one_threads_payloads_keep_their_order_whichever_way_each_takes() {
    let (_serial, m) = leader("ways");
    let inside = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    const N: usize = 600;
    for n in 0..N {
        let p = payload(0, n);
        let sent = if n % 3 == 0 {
            inside.block_on(async { m.group.submit(p) })
        } else {
            m.group.submit(p)
        };
        sent.unwrap_or_else(|e| panic!("payload {n} refused: {e}"));
    }
    wait_delivered(&[&m], &payload(0, N - 1));
    wait_until("every payload applied", || m.rec.messages().len() == N);
    assert_eq!(per_thread(&m)[&0], (0..N).collect::<Vec<_>>());
}

/// Threads submitting at once, some from plain threads and one from inside a
/// runtime: every payload is ordered exactly once, and each thread's in its
/// own order.
#[test]
fn concurrent_submitters_are_each_ordered_in_their_own_order() {
    let (_serial, m) = leader("many");
    const THREADS: usize = 4;
    const N: usize = 400;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let m = &m;
            s.spawn(move || {
                let inside = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                for n in 0..N {
                    let p = payload(t, n);
                    let sent = if t == 0 {
                        inside.block_on(async { m.group.submit(p) })
                    } else {
                        m.group.submit(p)
                    };
                    sent.unwrap_or_else(|e| panic!("payload {t}:{n} refused: {e}"));
                }
            });
        }
    });
    wait_until("every payload applied", || {
        m.rec.messages().len() == THREADS * N
    });
    let seen = per_thread(&m);
    for t in 0..THREADS {
        assert_eq!(
            seen[&t],
            (0..N).collect::<Vec<_>>(),
            "thread {t}'s payloads"
        );
    }
}
