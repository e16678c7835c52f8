//! The emulator's I/O: a TUN device in the router namespace, one thread
//! reading packets from it and deciding their fate, one writing each back
//! when its time comes, and one logging what each link did.
//!
//! The router's policy routing sends what one site routes to another into
//! the device; what the device gives back is routed on by destination (see
//! `tests/cluster/src/wan.rs` for the namespace layout, or the README).
//! Packets that cross no link given are written back at once.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{Read, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use log::{info, warn};
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::link::Fate;
use crate::topology::Topology;

/// What `run` needs.
pub struct Settings {
    /// The TUN device's name; it is made, and goes when this process ends.
    pub device: String,
    pub topology: Topology,
    /// Seeds the loss and jitter draws.
    pub seed: u64,
    /// How often each link's counts are logged (when they changed).
    pub report_every: Duration,
}

/// The largest packet the device gives: its MTU is the veths' 1500.
const MTU: u16 = 1500;

/// Runs until the device fails or the process is stopped.
pub fn run(settings: Settings) -> Result<()> {
    let mut config = tun::Configuration::default();
    config.tun_name(&settings.device).mtu(MTU).up();
    let device = tun::create(&config).with_context(|| format!("cannot make the TUN device {}", settings.device))?;
    let (mut reader, mut writer) = device.split();
    for (from, to, link) in settings.topology.links() {
        info!("WAN link {from} -> {to}: {:?}", link.spec());
    }
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            topology: settings.topology,
            rng: StdRng::seed_from_u64(settings.seed),
            pending: BinaryHeap::new(),
            sequence: 0,
        }),
        wake: Condvar::new(),
        clock: Instant::now(),
    });
    let releaser = shared.clone();
    std::thread::Builder::new().name("wan-release".into()).spawn(move || release(&releaser, &mut writer))?;
    let reporter = shared.clone();
    let every = settings.report_every;
    std::thread::Builder::new().name("wan-report".into()).spawn(move || report(&reporter, every))?;
    info!("WAN emulator forwarding through {} (seed {})", settings.device, settings.seed);
    let mut buf = vec![0u8; usize::from(MTU) + 64];
    loop {
        let n = reader.read(&mut buf).with_context(|| format!("reading from {}", settings.device))?;
        shared.admit(&buf[..n]);
    }
}

struct Shared {
    state: Mutex<State>,
    /// The releasing thread waits on this for the next packet due.
    wake: Condvar,
    clock: Instant,
}

struct State {
    topology: Topology,
    rng: StdRng,
    /// Packets waiting for their time, earliest first (by time, then by
    /// arrival, so equal times keep their order).
    pending: BinaryHeap<Reverse<Pending>>,
    sequence: u64,
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Pending {
    at: u64,
    sequence: u64,
    packet: Vec<u8>,
}

impl Shared {
    fn now(&self) -> u64 {
        u64::try_from(self.clock.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicked thread leaves consistent state behind: every change is one push or pop.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A packet read from the device: queued for its time, or dropped.
    fn admit(&self, packet: &[u8]) {
        let now = self.now();
        let mut state = self.lock();
        let at = match state.topology.route(packet) {
            None => now,
            Some(link) => {
                let State { topology, rng, .. } = &mut *state;
                match topology.link_mut(link).send(now, packet.len(), rng) {
                    Fate::Arrives(at) => at,
                    Fate::Lost | Fate::Overflowed => return,
                }
            }
        };
        state.sequence += 1;
        let sequence = state.sequence;
        let first = state.pending.peek().is_none_or(|Reverse(p)| at < p.at);
        state.pending.push(Reverse(Pending { at, sequence, packet: packet.to_vec() }));
        drop(state);
        if first {
            self.wake.notify_one();
        }
    }

    /// Waits for the earliest packet's time; returns every packet due.
    fn due(&self) -> Vec<Vec<u8>> {
        let mut state = self.lock();
        loop {
            let now = self.now();
            let wait = match state.pending.peek() {
                None => None,
                Some(Reverse(p)) if p.at <= now => break,
                Some(Reverse(p)) => Some(Duration::from_nanos(p.at - now)),
            };
            state = match wait {
                None => self.wake.wait(state).unwrap_or_else(|p| p.into_inner()),
                Some(wait) => self.wake.wait_timeout(state, wait).unwrap_or_else(|p| p.into_inner()).0,
            };
        }
        let now = self.now();
        let mut due = Vec::new();
        while state.pending.peek().is_some_and(|Reverse(p)| p.at <= now) {
            let Some(Reverse(p)) = state.pending.pop() else { break };
            due.push(p.packet);
        }
        due
    }
}

fn release(shared: &Shared, writer: &mut tun::Writer) {
    loop {
        for packet in shared.due() {
            // The kernel refuses a packet it cannot route (a site's link set
            // down by a test, say): it is lost, as on a real network.
            if let Err(e) = writer.write(&packet) {
                warn!("WAN emulator: a packet of {} bytes was not passed on: {e}", packet.len());
            }
        }
    }
}

fn report(shared: &Shared, every: Duration) {
    let mut last = Vec::new();
    loop {
        std::thread::sleep(every);
        let state = shared.lock();
        let counts: Vec<_> =
            state.topology.links().map(|(f, t, l)| (f.to_string(), t.to_string(), l.counts())).collect();
        let queued = state.pending.len();
        drop(state);
        if counts != last {
            for (from, to, c) in &counts {
                info!(
                    "WAN link {from} -> {to}: {} packets, {} bytes, {} lost, {} dropped by a full queue; {queued} \
                     packets waiting in all",
                    c.packets, c.bytes, c.lost, c.overflowed
                );
            }
            last = counts;
        }
    }
}
