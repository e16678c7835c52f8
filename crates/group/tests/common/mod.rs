//! Test harness: a recording replica, a capturing logger, cluster helpers.
#![allow(dead_code)]

pub mod version1_cert;

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tandem_group::{
    Connectivity, GroupChannel, GroupConfig, GroupError, MemberInfo, Membership, Ordered, RaftGroup, Replica, Timeouts,
};

pub const CLUSTER: &str = "tandem-test";
/// Only bounds a hung test; nothing asserts on how fast things happen.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// The events a replica saw, in order. Its snapshot is the whole history, so
/// a member that restored a snapshot must end up with the same history too.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    Message {
        origin: u64,
        #[serde(with = "tandem_group::wire::byte_vec")]
        payload: Vec<u8>,
    },
    View(Membership),
}

#[derive(Default)]
pub struct Journal {
    pub events: Vec<Event>,
    pub connectivity: Vec<Connectivity>,
    pub snapshots: usize,
    pub restores: usize,
    /// While set, the member's replica does not apply messages (a lagging
    /// applier): its state machine waits.
    pub held: bool,
    /// Set: the replica tells the group its `apply` never waits (it must
    /// then not be `held`), so the group applies on its worker directly.
    pub never_waits: bool,
}

#[derive(Clone, Default)]
pub struct Recording(Arc<Mutex<Journal>>);

impl Recording {
    pub fn journal(&self) -> MutexGuard<'_, Journal> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn events(&self) -> Vec<Event> {
        self.journal().events.clone()
    }

    pub fn messages(&self) -> Vec<(u64, Vec<u8>)> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Message { origin, payload } => Some((origin, payload)),
                Event::View(_) => None,
            })
            .collect()
    }

    /// Whether `payload` was applied; looks in place instead of copying.
    pub fn has_message(&self, payload: &[u8]) -> bool {
        self.journal().events.iter().rev().any(|e| matches!(e, Event::Message { payload: p, .. } if p == payload))
    }

    /// Messages applied from `origin`, counted in place.
    pub fn count_from(&self, origin: u64) -> usize {
        self.journal().events.iter().filter(|e| matches!(e, Event::Message { origin: o, .. } if *o == origin)).count()
    }

    pub fn views(&self) -> Vec<Membership> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                Event::View(v) => Some(v),
                Event::Message { .. } => None,
            })
            .collect()
    }

    pub fn last_view(&self) -> Option<Membership> {
        self.events().into_iter().rev().find_map(|e| match e {
            Event::View(v) => Some(v),
            Event::Message { .. } => None,
        })
    }

    pub fn connectivity(&self) -> Vec<Connectivity> {
        self.journal().connectivity.clone()
    }
}

pub struct Recorder(pub Recording);

impl Replica for Recorder {
    fn apply(&mut self, event: Ordered<'_>) {
        while self.0.journal().held {
            std::thread::sleep(Duration::from_millis(2));
        }
        let event = match event {
            Ordered::Message { origin, payload } => Event::Message { origin, payload: payload.to_vec() },
            Ordered::Membership(m) => Event::View(m),
        };
        self.0.journal().events.push(event);
    }

    fn snapshot(&self) -> Vec<u8> {
        let mut j = self.0.journal();
        j.snapshots += 1;
        bincode::serialize(&j.events).expect("encode history")
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        let events: Vec<Event> = bincode::deserialize(snapshot).map_err(|e| e.to_string())?;
        let mut j = self.0.journal();
        j.events = events;
        j.restores += 1;
        Ok(())
    }

    fn connectivity(&mut self, now: Connectivity) {
        self.0.journal().connectivity.push(now);
    }

    fn position(&self) -> i64 {
        self.0.journal().events.len() as i64
    }

    fn apply_may_wait(&self, _payload_bytes: usize) -> bool {
        !self.0.journal().never_waits
    }
}

// ---- logging -------------------------------------------------------------

/// Keeps every warning and error so tests can check what was reported;
/// prints everything when TANDEM_TEST_LOG is set (e.g. `info`, `debug`).
struct CaptureLogger {
    /// Each line with the thread that logged it.
    lines: Mutex<Vec<(std::thread::ThreadId, String)>>,
    print: Option<log::LevelFilter>,
    start: Instant,
}

impl log::Log for CaptureLogger {
    fn enabled(&self, meta: &log::Metadata<'_>) -> bool {
        meta.target().starts_with("tandem_group")
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let line = format!("{:?} {}", record.level(), record.args());
        if self.print.is_some_and(|p| record.level() <= p) {
            let thread = std::thread::current().name().unwrap_or("?").to_string();
            match turmoil::sim_elapsed() {
                // In a simulation: its time, which a replay must repeat.
                Some(t) => eprintln!("{:>8.3}s sim [{thread}] {line}", t.as_secs_f64()),
                None => eprintln!("{:>8.3}s [{thread}] {line}", self.start.elapsed().as_secs_f64()),
            }
        }
        if record.level() <= log::Level::Info {
            let thread = std::thread::current().id();
            self.lines.lock().unwrap_or_else(|p| p.into_inner()).push((thread, line));
        }
    }

    fn flush(&self) {}
}

static LOGGER: OnceLock<&'static CaptureLogger> = OnceLock::new();

pub fn init_logging() {
    let logger = *LOGGER.get_or_init(|| {
        let print = std::env::var("TANDEM_TEST_LOG").ok().and_then(|l| l.parse().ok());
        let logger = Box::leak(Box::new(CaptureLogger { lines: Mutex::new(Vec::new()), print, start: Instant::now() }));
        let _ = log::set_logger(logger);
        log::set_max_level(log::LevelFilter::Debug);
        logger
    });
    let _ = logger;
}

/// Whether some captured log line contains every one of `parts`.
pub fn logged(parts: &[&str]) -> bool {
    count_logged(parts) > 0
}

/// How many captured lines contain all of `parts`.
pub fn count_logged(parts: &[&str]) -> usize {
    let Some(logger) = LOGGER.get() else {
        return 0;
    };
    let lines = logger.lines.lock().unwrap_or_else(|p| p.into_inner());
    lines.iter().filter(|(_, l)| parts.iter().all(|p| l.contains(p))).count()
}

/// How many lines this thread logged that contain all of `parts`: a
/// simulation runs every host on its test's thread, so this counts one
/// run's lines even while other tests of the binary run beside it.
pub fn count_logged_here(parts: &[&str]) -> usize {
    let Some(logger) = LOGGER.get() else {
        return 0;
    };
    let here = std::thread::current().id();
    let lines = logger.lines.lock().unwrap_or_else(|p| p.into_inner());
    lines.iter().filter(|(t, l)| *t == here && parts.iter().all(|p| l.contains(p))).count()
}

// ---- cluster helpers -----------------------------------------------------

/// Scenario tests share 2 cores: run them one at a time so that timeouts of
/// one are not eaten by another's CPU.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    init_logging();
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn test_timeouts() -> Timeouts {
    Timeouts {
        heartbeat: Duration::from_millis(50),
        suspect: Duration::from_millis(500),
        inactive: Duration::from_millis(1500),
    }
}

pub fn config(name: &str, cluster: &str, bootstrap: bool, peers: Vec<String>) -> GroupConfig {
    GroupConfig {
        cluster_name: cluster.into(),
        listen_addr: "127.0.0.1:0".into(),
        peers,
        bootstrap,
        me: MemberInfo { name: name.into(), ..Default::default() },
        timeouts: test_timeouts(),
        log: Default::default(),
        resume_at: None,
        start_anew: None,
        history: None,
        tls: None,
        admission: None,
        partition: Default::default(),
        send_window: Default::default(),
        read_lease: Default::default(),
        threads: 1,
        wires: None,
        donors: String::new(),
    }
}

pub struct Member {
    pub group: Arc<RaftGroup>,
    pub rec: Recording,
    pub name: String,
}

impl Member {
    pub fn addr(&self) -> String {
        self.group.local_addr().to_string()
    }

    pub fn id(&self) -> u64 {
        self.group.me()
    }
}

pub fn start(config: GroupConfig) -> Member {
    let rec = Recording::default();
    let name = config.me.name.clone();
    let group = RaftGroup::start(config, Box::new(Recorder(rec.clone()))).expect("start member");
    Member { group, rec, name }
}

pub fn bootstrap(name: &str) -> Member {
    start(config(name, CLUSTER, true, vec![]))
}

pub fn join(name: &str, via: &Member) -> Member {
    start(config(name, CLUSTER, false, vec![via.addr()]))
}

pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn wait_primary(m: &Member) {
    wait_until(&format!("{} is primary", m.name), || m.group.status().primary);
}

/// Submits, retrying while the member is (transiently) non-primary.
pub fn submit(m: &Member, payload: &[u8]) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match m.group.submit(payload.to_vec()) {
            Ok(()) => return,
            Err(GroupError::NonPrimary) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("submit on {} failed: {e}", m.name),
        }
    }
}

/// Submits on `m` until `m` has applied `payload`. Right after a leader
/// change a forwarded payload may be lost (its answer timed out, and the
/// group never resends what the leader may have appended); the engine
/// then rolls the transaction back and its client retries, as this does.
pub fn submit_until_ordered(m: &Member, payload: &[u8]) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        submit(m, payload);
        let attempt = Instant::now() + PATIENCE / 3;
        while Instant::now() < attempt && !m.rec.has_message(payload) {
            std::thread::sleep(Duration::from_millis(10));
        }
        if m.rec.has_message(payload) {
            return;
        }
        assert!(Instant::now() < deadline, "{} never ordered {:?}", m.name, String::from_utf8_lossy(payload));
    }
}

/// Waits until every member has applied `payload`.
pub fn wait_delivered(members: &[&Member], payload: &[u8]) {
    for m in members {
        wait_until(&format!("{} applied {:?}", m.name, String::from_utf8_lossy(payload)), || {
            m.rec.has_message(payload)
        });
    }
}

/// Waits until every member's history is the same, then returns it.
pub fn same_history(members: &[&Member]) -> Vec<Event> {
    wait_until("all members have the same history", || {
        let first = members[0].rec.events();
        members.iter().all(|m| m.rec.events() == first)
    });
    members[0].rec.events()
}

/// Threads of all Tandem group runtimes in this process.
pub fn group_threads() -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| t.ok())
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .filter(|comm| comm.starts_with("tandem-group-"))
        .count()
}

/// The member of `members` that leads, as it sees itself.
pub fn leader_of<'a>(members: &[&'a Member]) -> &'a Member {
    members.iter().copied().find(|m| m.group.status().leader == Some(m.id())).expect("a leader among the members")
}

/// Three voters: `names[0]` bootstrapped with no peer address at all (as
/// `--wsrep-new-cluster` with `gcomm://`), the others joined through it.
pub fn three_voters(names: [&str; 3]) -> Vec<Member> {
    let first = start(config(names[0], CLUSTER, true, vec![]));
    wait_primary(&first);
    let mut members = vec![first];
    for name in &names[1..] {
        let m = start(config(name, CLUSTER, false, vec![members[0].addr()]));
        wait_primary(&m);
        m.group.promote(m.id()).expect("promote");
        members.push(m);
    }
    wait_until("three voters everywhere", || {
        members.iter().all(|m| m.rec.last_view().is_some_and(|v| v.voters.len() == 3))
    });
    members
}

pub fn told_non_primary(m: &Member) -> bool {
    m.rec.connectivity().iter().any(|c| matches!(c, Connectivity::NonPrimary { .. }))
}

// ---- raw connections --------------------------------------------------

/// A plain TCP connection to `m`'s group listener, with a read timeout.
pub fn raw_connect(m: &Member) -> std::net::TcpStream {
    let s = std::net::TcpStream::connect(m.group.local_addr()).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// A raw connection to `m` that has said hello as member `id`.
pub fn connect_as(m: &Member, id: u64) -> std::net::TcpStream {
    use std::io::{Read, Write};
    use tandem_group::wire::{self, Hello, PROTOCOL_VERSION};
    let mut s = raw_connect(m);
    let hello = Hello { cluster: CLUSTER.into(), member: id, info: tandem_group::MemberInfo::default(), group: None };
    s.write_all(b"TNDM").unwrap();
    s.write_all(&PROTOCOL_VERSION.to_be_bytes()).unwrap();
    s.write_all(&wire::encode_frame(&hello).unwrap()).unwrap();
    let mut preamble = [0u8; 8];
    s.read_exact(&mut preamble).expect("the listener's preamble");
    let reply: wire::HelloReply = read_frame(&mut s);
    assert!(matches!(reply, wire::HelloReply::Accepted { .. }), "hello as member {id} refused: {reply:?}");
    s
}

pub fn read_frame<T: serde::de::DeserializeOwned>(s: &mut std::net::TcpStream) -> T {
    use std::io::Read;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("a frame's length");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).expect("a frame's body");
    tandem_group::wire::decode(&body).expect("a frame that decodes")
}
