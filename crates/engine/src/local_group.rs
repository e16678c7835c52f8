//! An in-process group: one sequencer thread orders everything submitted by
//! any member of the hub. For engine tests of several nodes in one process,
//! and for running the provider without the network.
//!
//! Membership changes when members join or leave the hub; a member can be cut
//! off (non-primary) and reconnected to model partitions.

use std::collections::BTreeMap;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;
use tandem_group::{
    CacheStatus, Connectivity, GroupChannel, GroupConfig, GroupError, GroupStarter, GroupStatus, Identity, MemberId,
    MemberInfo, Membership, Ordered, Replica,
};

use crate::types::Uuid;

/// Picks the submissions (encoded envelopes) to lose.
pub type LossFilter = Box<dyn Fn(&[u8]) -> bool + Send>;

enum Input {
    Join(MemberId, MemberInfo, Box<dyn Replica>),
    Leave(MemberId),
    Message(MemberId, Vec<u8>),
    Cut(MemberId, bool),
    /// Reconnect a member without telling it yet (see `heal_quietly`).
    HealQuietly(MemberId),
    ReportPrimary(MemberId),
    /// Answers once everything sent before it was delivered: whether the
    /// member is connected (a read barrier).
    Barrier(MemberId, Sender<bool>),
    Stop,
}

struct Seat {
    info: MemberInfo,
    replica: Box<dyn Replica>,
    cut: bool,
}

/// The shared sequencer.
pub struct LocalHub {
    tx: Mutex<Sender<Input>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    next_id: Mutex<MemberId>,
    cut: Arc<Mutex<BTreeMap<MemberId, bool>>>,
    /// Per member: how many more of its submissions that the filter picks
    /// are accepted and then never ordered (what a leader change does to
    /// in-flight proposals).
    lose: Mutex<BTreeMap<MemberId, (usize, LossFilter)>>,
}

impl LocalHub {
    pub fn new() -> Arc<LocalHub> {
        let (tx, rx) = channel();
        let cut = Arc::new(Mutex::new(BTreeMap::new()));
        let thread = std::thread::Builder::new()
            .name("tandem-local-hub".into())
            .spawn(move || sequence(rx))
            .expect("spawn hub thread");
        Arc::new(LocalHub {
            tx: Mutex::new(tx),
            thread: Mutex::new(Some(thread)),
            next_id: Mutex::new(1),
            cut,
            lose: Mutex::new(BTreeMap::new()),
        })
    }

    /// A member of this hub, opened but not started (a `GroupFactory`
    /// returns this). Every member is new: the hub keeps nothing durable.
    pub fn open(self: &Arc<Self>, config: GroupConfig) -> Box<dyn GroupStarter> {
        let id = {
            let mut n = self.next_id.lock();
            *n += 1;
            *n
        };
        let identity = Identity { member: id, uuid: Uuid::random().0, incarnation: 1, restored: false };
        Box::new(LocalStarter { hub: self.clone(), config, identity })
    }

    /// Opens and starts a member in one go, with `config.me.app`.
    pub fn join(self: &Arc<Self>, config: GroupConfig, replica: Box<dyn Replica>) -> Arc<dyn GroupChannel> {
        let app = config.me.app.clone();
        self.open(config).start(app, replica).expect("the hub always starts a member")
    }

    fn seat(self: &Arc<Self>, id: MemberId, me: MemberInfo, replica: Box<dyn Replica>) -> Arc<LocalMember> {
        self.cut.lock().insert(id, false);
        let _ = self.tx.lock().send(Input::Join(id, me, replica));
        Arc::new(LocalMember { hub: self.clone(), id })
    }

    /// Cuts a member off from the others (it becomes non-primary) or heals it.
    pub fn set_cut(&self, id: MemberId, cut: bool) {
        self.cut.lock().insert(id, cut);
        let _ = self.tx.lock().send(Input::Cut(id, cut));
    }

    /// Reconnects a cut-off member without reporting it primary: it receives
    /// what the group orders from now on but still believes it is cut off,
    /// until [`LocalHub::report_primary`]. With Raft, an entry can be applied
    /// before the connectivity change that let it through is reported.
    pub fn heal_quietly(&self, id: MemberId) {
        self.cut.lock().insert(id, false);
        let _ = self.tx.lock().send(Input::HealQuietly(id));
    }

    pub fn report_primary(&self, id: MemberId) {
        let _ = self.tx.lock().send(Input::ReportPrimary(id));
    }

    /// The next `count` submissions of member `id` that `pick` selects
    /// succeed but are never ordered.
    pub fn lose_next(&self, id: MemberId, count: usize, pick: LossFilter) {
        self.lose.lock().insert(id, (count, pick));
    }

    pub fn stop(&self) {
        let _ = self.tx.lock().send(Input::Stop);
        let thread = self.thread.lock().take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

fn membership(seats: &BTreeMap<MemberId, Seat>) -> Membership {
    let live: BTreeMap<MemberId, MemberInfo> =
        seats.iter().filter(|(_, s)| !s.cut).map(|(id, s)| (*id, s.info.clone())).collect();
    Membership { voters: live.keys().copied().collect(), learners: vec![], members: live }
}

fn sequence(rx: Receiver<Input>) {
    let mut seats: BTreeMap<MemberId, Seat> = BTreeMap::new();
    let broadcast = |seats: &mut BTreeMap<MemberId, Seat>, event: &dyn Fn() -> Ordered<'static>| {
        for seat in seats.values_mut().filter(|s| !s.cut) {
            seat.replica.apply(event());
        }
    };
    while let Ok(input) = rx.recv() {
        match input {
            Input::Join(id, info, mut replica) => {
                if !seats.is_empty() {
                    if let Some(donor) = seats.values().find(|s| !s.cut) {
                        let _ = replica.restore(&donor.replica.snapshot());
                    }
                }
                replica.connectivity(Connectivity::Primary);
                seats.insert(id, Seat { info, replica, cut: false });
                let m = membership(&seats);
                broadcast(&mut seats, &|| Ordered::Membership(m.clone()));
            }
            Input::Leave(id) => {
                if seats.remove(&id).is_some() {
                    let m = membership(&seats);
                    broadcast(&mut seats, &|| Ordered::Membership(m.clone()));
                }
            }
            Input::Message(origin, payload) => {
                if seats.get(&origin).is_some_and(|s| !s.cut) {
                    for seat in seats.values_mut().filter(|s| !s.cut) {
                        seat.replica.apply(Ordered::Message { origin, payload: &payload });
                    }
                }
            }
            Input::Cut(id, cut) => {
                if let Some(seat) = seats.get_mut(&id) {
                    seat.cut = cut;
                    seat.replica.connectivity(if cut {
                        Connectivity::NonPrimary { reachable: vec![id] }
                    } else {
                        Connectivity::Primary
                    });
                }
            }
            Input::HealQuietly(id) => {
                if let Some(seat) = seats.get_mut(&id) {
                    seat.cut = false;
                }
            }
            Input::ReportPrimary(id) => {
                if let Some(seat) = seats.get_mut(&id) {
                    seat.replica.connectivity(Connectivity::Primary);
                }
            }
            Input::Barrier(id, reply) => {
                let _ = reply.send(seats.get(&id).is_some_and(|s| !s.cut));
            }
            Input::Stop => break,
        }
    }
}

struct LocalStarter {
    hub: Arc<LocalHub>,
    config: GroupConfig,
    identity: Identity,
}

impl GroupStarter for LocalStarter {
    fn identity(&self) -> Identity {
        self.identity
    }

    fn start(self: Box<Self>, app: Vec<u8>, replica: Box<dyn Replica>) -> Result<Arc<dyn GroupChannel>, GroupError> {
        let mut me = self.config.me;
        me.uuid = self.identity.uuid;
        me.app = app;
        let member: Arc<dyn GroupChannel> = self.hub.seat(self.identity.member, me, replica);
        Ok(member)
    }
}

pub struct LocalMember {
    hub: Arc<LocalHub>,
    id: MemberId,
}

impl GroupChannel for LocalMember {
    fn me(&self) -> MemberId {
        self.id
    }

    fn submit(&self, payload: Vec<u8>) -> Result<(), GroupError> {
        if self.hub.cut.lock().get(&self.id).copied().unwrap_or(true) {
            return Err(GroupError::NonPrimary);
        }
        if let Some((n, pick)) = self.hub.lose.lock().get_mut(&self.id) {
            if *n > 0 && pick(&payload) {
                *n -= 1;
                return Ok(());
            }
        }
        self.hub.tx.lock().send(Input::Message(self.id, payload)).map_err(|_| GroupError::Closed)
    }

    fn promote(&self, _member: MemberId) -> Result<(), GroupError> {
        Ok(())
    }

    fn status(&self) -> GroupStatus {
        GroupStatus {
            me: self.id,
            primary: !self.hub.cut.lock().get(&self.id).copied().unwrap_or(true),
            leader: None,
            leader_name: None,
        }
    }

    fn leave(&self, _timeout: Duration) -> Result<(), GroupError> {
        self.hub.cut.lock().remove(&self.id);
        self.hub.tx.lock().send(Input::Leave(self.id)).map_err(|_| GroupError::Closed)
    }

    fn shutdown(&self) {}

    fn bootstrap(&self) -> Result<(), GroupError> {
        Err(GroupError::Config("the in-process hub has no primary component to re-form".into()))
    }

    fn release_upto(&self, _position: i64) {}

    fn cache(&self) -> CacheStatus {
        CacheStatus::default()
    }

    fn reload_tls(&self) -> Result<(), GroupError> {
        Err(GroupError::Config("an in-process group has no channel to encrypt".into()))
    }

    fn announce_group(&self, _group: Option<[u8; 16]>) {}

    /// An in-process group is never partitioned: its members are cut only
    /// by the test's hand, which decides who stays primary.
    fn set_partition_policy(&self, _policy: tandem_group::PartitionPolicy) {}

    /// Modelled as a cut (the hub has no connections to close).
    fn isolate(&self, to: tandem_group::Isolation) -> Result<(), GroupError> {
        self.hub.set_cut(self.id, to != tandem_group::Isolation::Off);
        Ok(())
    }

    fn links(&self) -> Vec<tandem_group::Link> {
        Vec::new() // in-process: no connections
    }

    /// The sequencer delivers in the order it receives: once it reaches the
    /// barrier, everything submitted before was delivered to every member.
    fn read_barrier(&self, timeout: Duration) -> Result<(), GroupError> {
        let (tx, rx) = channel();
        self.hub.tx.lock().send(Input::Barrier(self.id, tx)).map_err(|_| GroupError::Closed)?;
        match rx.recv_timeout(timeout) {
            Ok(true) => Ok(()),
            Ok(false) => Err(GroupError::NonPrimary),
            Err(_) => Err(GroupError::Other(format!("no read barrier within {timeout:?}"))),
        }
    }
}
