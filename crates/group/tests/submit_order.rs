//! The two ways into the order. When nothing waits in the submit queue, a
//! caller's own thread hands its payload on: on the leader to the Raft core,
//! on a follower to its connection to the leader. From inside a runtime, or
//! behind queued payloads, it goes through the queue. Whichever way each
//! payload takes, what one thread submits is ordered as it submitted it, and
//! nothing is lost or ordered twice.

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
        seen.entry(thread.parse().unwrap()).or_default().push(n.parse().unwrap());
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

/// Three voters whose replicas never wait, and the one of them that
/// submits: a follower. The guard keeps the test alone.
fn follower(names: [&str; 3]) -> (std::sync::MutexGuard<'static, ()>, Vec<Member>, usize) {
    let serial = serial();
    let members = three_voters(names);
    for m in &members {
        m.rec.journal().never_waits = true;
    }
    let at = members
        .iter()
        .position(|m| m.group.status().leader.is_some_and(|l| l != m.id()))
        .expect("a follower that knows its leader");
    (serial, members, at)
}

/// One thread alternates between the direct way (a plain thread) and the
/// queue (the same thread inside a runtime): a payload queued first must
/// not be overtaken by the next one handed over directly.
#[test]
fn one_threads_payloads_keep_their_order_whichever_way_each_takes() {
    let (_serial, m) = leader("ways");
    one_thread_in_order(&m, &m);
}

/// The same on a follower, whose direct way writes to the leader's
/// connection and whose queue's task writes to that same connection.
#[test]
fn a_followers_payloads_keep_their_order_whichever_way_each_takes() {
    let (_serial, members, at) = follower(["fw1", "fw2", "fw3"]);
    let observer = &members[(at + 1) % 3];
    one_thread_in_order(&members[at], observer);
    assert_eq!(per_thread(observer), per_thread(&members[at]), "every member alike");
}

/// Submits on `m` from one thread, a third of the payloads from inside a
/// runtime; `observer` must apply them all, each once, in order.
fn one_thread_in_order(m: &Member, observer: &Member) {
    let inside = tokio::runtime::Builder::new_current_thread().build().unwrap();
    const N: usize = 600;
    for n in 0..N {
        let p = payload(0, n);
        let sent = if n % 3 == 0 { inside.block_on(async { m.group.submit(p) }) } else { m.group.submit(p) };
        sent.unwrap_or_else(|e| panic!("payload {n} refused: {e}"));
    }
    wait_delivered(&[m, observer], &payload(0, N - 1));
    wait_until("every payload applied", || m.rec.messages().len() == N && observer.rec.messages().len() == N);
    assert_eq!(per_thread(observer)[&0], (0..N).collect::<Vec<_>>());
}

/// Threads submitting at once, some from plain threads and one from inside a
/// runtime: every payload is ordered exactly once, and each thread's in its
/// own order.
#[test]
fn concurrent_submitters_are_each_ordered_in_their_own_order() {
    let (_serial, m) = leader("many");
    concurrent_in_order(&m, &m);
}

/// The same on a follower.
#[test]
fn concurrent_submitters_on_a_follower_are_each_ordered_in_their_own_order() {
    let (_serial, members, at) = follower(["fc1", "fc2", "fc3"]);
    concurrent_in_order(&members[at], &members[(at + 1) % 3]);
}

fn concurrent_in_order(m: &Member, observer: &Member) {
    const THREADS: usize = 4;
    const N: usize = 400;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                let inside = tokio::runtime::Builder::new_current_thread().build().unwrap();
                for n in 0..N {
                    let p = payload(t, n);
                    let sent = if t == 0 { inside.block_on(async { m.group.submit(p) }) } else { m.group.submit(p) };
                    sent.unwrap_or_else(|e| panic!("payload {t}:{n} refused: {e}"));
                }
            });
        }
    });
    wait_until("every payload applied", || observer.rec.messages().len() == THREADS * N);
    let seen = per_thread(observer);
    for t in 0..THREADS {
        assert_eq!(seen[&t], (0..N).collect::<Vec<_>>(), "thread {t}'s payloads");
    }
}

/// A follower keeps submitting while the leader hands its leadership over
/// and leaves. What reaches the old leader once it is handing over comes
/// back and goes to the new one ahead of anything newer, and what it took
/// before is in the log the transfer hands on: every member applies every
/// payload, once, in submission order. (Without the hand-back, the old
/// leader's Raft core dropped a run of them without a word.)
#[test]
fn a_followers_payloads_stay_in_order_across_a_leader_hand_over() {
    let (_serial, members, at) = follower(["fh1", "fh2", "fh3"]);
    let leader = leader_of(&members.iter().collect::<Vec<_>>());
    let stay: Vec<&Member> = members.iter().filter(|m| m.id() != leader.id()).collect();
    let submitter = &members[at];
    let stop = std::sync::atomic::AtomicBool::new(false);
    let submitted = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                submit(submitter, &payload(0, n));
                n += 1;
            }
            n
        });
        wait_until("payloads applied before the hand-over", || submitter.rec.messages().len() >= 500);
        leader.group.leave(std::time::Duration::from_secs(10)).expect("the leader leaves");
        let after = submitter.rec.messages().len();
        wait_until("payloads applied after the hand-over", || {
            stay.iter().all(|m| m.rec.messages().len() >= after + 500)
        });
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().expect("the writer")
    });
    leader.group.shutdown();
    submit(submitter, b"9:0");
    for m in &stay {
        wait_until(&format!("{} applied the last payload", m.name), || m.rec.has_message(b"9:0"));
        let seen = per_thread(m)[&0].clone();
        let gaps: Vec<(usize, usize)> = seen.windows(2).filter(|w| w[1] != w[0] + 1).map(|w| (w[0], w[1])).collect();
        assert!(
            seen[0] == 0 && gaps.is_empty() && seen.len() == submitted,
            "{}: every payload once, in submission order; {} of {submitted}, first {}, breaks after/before {gaps:?}",
            m.name,
            seen.len(),
            seen[0]
        );
    }
    assert_eq!(per_thread(stay[0]), per_thread(stay[1]), "both members alike");
    // The writer never waits for its payloads; the leaders held it back
    // instead of letting a backlog into their Raft cores, and their cores
    // dropped nothing.
    for m in members.iter() {
        let (peak, lost) = m.group.core_window();
        assert!(peak <= tandem_group::MAX_PAYLOADS_IN_CORE, "{}: {peak} payloads in its core at once", m.name);
        assert_eq!(lost, 0, "{}: payloads its core did not order", m.name);
    }
}
