//! The simulated network the nodes' group members run on: three turmoil
//! hosts, stepped on a thread of their own at the wall clock's pace (the
//! shell's timers and waits run on the wall clock), with the faults the
//! test thread asks for carried out between two steps.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tokio::runtime::Handle;

use crate::sim_net;

pub const HOSTS: [&str; 3] = ["n1", "n2", "n3"];
pub const PORT: u16 = 4567;
/// How long the simulation may stand still before the run counts it as
/// stopped: its one thread is blocked (a group thread waiting for a lock).
const STALL: Duration = Duration::from_secs(5);

/// What the test thread asks of the simulation.
enum Fault {
    /// Cut (`true`) or mend the link between two hosts.
    Link(&'static str, &'static str, bool),
    /// The host's software dies at once (kill -9, power cut): its runtime
    /// and every task on it are dropped, its connections go silent. What
    /// its disks keep is taken just before (by the closure), with no step
    /// of the simulation in between.
    Crash(&'static str, Box<dyn FnOnce() + Send>),
    /// The host's software starts again (a new runtime).
    Bounce(&'static str),
}

/// The simulation, stepped on a thread of its own (`World::start`).
#[derive(Default)]
pub struct World {
    /// Each host's runtime, while its software runs.
    runtimes: Mutex<BTreeMap<&'static str, Handle>>,
    /// Steps taken: the runner's sign of life.
    steps: AtomicU64,
    pub stop: AtomicBool,
    faults: Mutex<Vec<Fault>>,
    /// Faults carried out so far.
    done: AtomicU64,
    asked: AtomicU64,
}

impl World {
    /// Starts the thread that steps the simulation: three hosts, each
    /// keeping its runtime up for the members started on it.
    /// `defect`: a defect of the group's put back on the stepping thread,
    /// where every member runs (feature `negative-tests`).
    pub fn start(defect: Option<tandem_group::injected::Defect>) -> (Arc<World>, thread::JoinHandle<()>) {
        let world = Arc::new(World::default());
        let stepper = {
            let world = world.clone();
            thread::spawn(move || {
                #[cfg(feature = "negative-tests")]
                tandem_group::injected::inject(defect);
                #[cfg(not(feature = "negative-tests"))]
                let _ = defect;
                world.run()
            })
        };
        (world, stepper)
    }

    fn run(self: Arc<World>) {
        let mut sim = turmoil::Builder::new()
            .simulation_duration(Duration::from_secs(3600))
            .tick_duration(Duration::from_millis(1))
            .tcp_capacity(1 << 20)
            // A LAN: turmoil's default of up to 100 ms a message would make
            // a commit a matter of several hundred.
            .min_message_latency(Duration::from_micros(100))
            .max_message_latency(Duration::from_millis(2))
            .build();
        for name in HOSTS {
            let world = self.clone();
            sim.host(name, move || {
                let world = world.clone();
                async move {
                    world.runtimes.lock().unwrap().insert(name, Handle::current());
                    std::future::pending::<()>().await;
                    Ok(())
                }
            });
        }
        let started = Instant::now();
        while !self.stop.load(Ordering::Acquire) {
            let faults: Vec<Fault> = self.faults.lock().unwrap().drain(..).collect();
            for fault in faults {
                self.carry_out(&mut sim, fault);
                self.done.fetch_add(1, Ordering::AcqRel);
            }
            sim.step().expect("the simulation");
            self.steps.fetch_add(1, Ordering::Release);
            // The wall clock's pace: the shell's timers run on it.
            let ahead = sim.elapsed().saturating_sub(started.elapsed());
            if !ahead.is_zero() {
                thread::sleep(ahead);
            }
        }
    }

    fn carry_out(&self, sim: &mut turmoil::Sim<'_>, fault: Fault) {
        match fault {
            Fault::Link(a, b, true) => sim.partition(a, b),
            Fault::Link(a, b, false) => sim.repair(a, b),
            Fault::Crash(host, at_the_crash) => {
                at_the_crash();
                self.runtimes.lock().unwrap().remove(host);
                sim_net::power_cut(|| sim.crash(host));
            }
            Fault::Bounce(host) => sim.bounce(host),
        }
    }

    /// Asks for `faults` and waits until the stepping thread carried them out.
    fn ask(&self, faults: impl IntoIterator<Item = Fault>) {
        let faults: Vec<Fault> = faults.into_iter().collect();
        let n = faults.len() as u64;
        let target = {
            let mut queue = self.faults.lock().unwrap();
            queue.extend(faults);
            self.asked.fetch_add(n, Ordering::AcqRel) + n
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.done.load(Ordering::Acquire) < target {
            assert!(Instant::now() < deadline, "the simulation did not carry out the faults asked");
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// The runtime of `host`'s software, once it runs.
    pub fn runtime(&self, host: &str) -> Handle {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(h) = self.runtimes.lock().unwrap().get(host) {
                return h.clone();
            }
            assert!(Instant::now() < deadline, "host {host} did not start");
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Cuts (or mends) the links between `host` and every other host.
    pub fn isolate(&self, host: &'static str, cut: bool) {
        self.ask(HOSTS.into_iter().filter(|h| *h != host).map(|other| Fault::Link(host, other, cut)));
    }

    /// `host`'s software dies at once: its group member and every
    /// connection of it, with no FIN. `at_the_crash` runs on the stepping
    /// thread right before, while no member moves: it takes what the
    /// host's disks keep.
    pub fn crash(&self, host: &'static str, at_the_crash: impl FnOnce() + Send + 'static) {
        self.ask([Fault::Crash(host, Box::new(at_the_crash))]);
    }

    /// `host`'s software starts again, on a runtime of its own.
    pub fn bounce(&self, host: &'static str) {
        self.ask([Fault::Bounce(host)]);
        self.runtime(host);
    }

    /// Whether the simulation still moves: some step within `STALL`.
    pub fn moving(&self) -> bool {
        let before = self.steps.load(Ordering::Acquire);
        let deadline = Instant::now() + STALL;
        while Instant::now() < deadline {
            if self.steps.load(Ordering::Acquire) != before {
                return true;
            }
            thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

/// Waits up to `within` of wall time for `cond`, while the simulation moves.
pub fn wait_for(world: &World, what: &str, within: Duration, cond: impl Fn() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + within;
    while !cond() {
        if !world.moving() {
            return Err(format!("the simulation stopped while waiting for {what}: a group thread is blocked"));
        }
        if Instant::now() > deadline {
            return Err(format!("{what}: not within {within:?}"));
        }
        thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}
