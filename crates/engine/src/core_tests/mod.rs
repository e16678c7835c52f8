//! The core driven by a real `GroupState`: each test plays the ordered
//! events of a scenario and checks the commands that come out.

use std::collections::BTreeMap;

use tandem_group_api::{MemberInfo, Membership, Ordered};

use super::*;
use crate::message::{Envelope, JoinInfo};
use crate::writeset::{flags, Key, KeyType};

mod transfers;
mod walk;

const ME: u8 = 1;
const OTHER: u8 = 2;

fn uuid(n: u8) -> Uuid {
    Uuid([n; 16])
}

/// A member info carrying the join info of incarnation `inc` at `position`.
fn info(n: u8, inc: u32, position: Gtid) -> MemberInfo {
    MemberInfo {
        uuid: [n; 16],
        name: format!("node{n}"),
        app: JoinInfo { incarnation: inc, position, arbitrator: false, inherited_last_write: None }.encode(),
        ..Default::default()
    }
}

fn envelope(from: u8, inc: u32, token: u64, body: Body) -> Vec<u8> {
    Envelope { source: uuid(from), incarnation: inc, token, body, epoch: 0 }.encode()
}

fn write_set(from: u8, last_seen: Seqno, row: u8, len: usize) -> Body {
    Body::WriteSet(WriteSet {
        source: uuid(from),
        trx_id: row as u64,
        conn_id: 1,
        flags: flags::TRX_START | flags::TRX_END,
        last_seen,
        safe: last_seen,
        keys: vec![Key { parts: vec![b"db".to_vec(), b"t".to_vec(), vec![row]], kind: KeyType::Exclusive }],
        data: vec![row; len],
    })
}

/// The group's replicated state and this node's core, fed the same events.
struct Harness {
    state: GroupState,
    core: NodeCore,
    members: BTreeMap<u64, MemberInfo>,
    now: u64,
}

impl Harness {
    fn new(core: NodeCore) -> Harness {
        Harness { state: GroupState::default(), core, members: BTreeMap::new(), now: 0 }
    }

    fn members(&mut self, infos: Vec<(u8, MemberInfo)>) -> Vec<Command> {
        for (n, i) in infos {
            self.members.insert(n as u64, i);
        }
        let m = Membership {
            voters: self.members.keys().copied().collect(),
            learners: vec![],
            members: self.members.clone(),
        };
        let outcome = self.state.apply(Ordered::Membership(m));
        self.core.on_ordered(outcome, &self.state)
    }

    /// The group removes member `n` (eviction, or a component formed without it).
    fn remove(&mut self, n: u8) -> Vec<Command> {
        self.members.remove(&(n as u64));
        self.members(vec![])
    }

    fn message(&mut self, from: u8, inc: u32, token: u64, body: Body) -> Vec<Command> {
        let payload = envelope(from, inc, token, body);
        let outcome = self.state.apply(Ordered::Message { origin: from as u64, payload: &payload });
        self.core.on_ordered(outcome, &self.state)
    }

    /// A write-set of `OTHER` that has seen everything.
    fn remote_write(&mut self) -> Vec<Command> {
        let seen = self.state.seqno;
        self.message(OTHER, 1, 0, write_set(OTHER, seen, (seen % 200) as u8, 10))
    }

    fn tick(&mut self, ms: u64, committed: Seqno) -> Vec<Command> {
        self.now += ms;
        self.core.on_tick(self.now, committed)
    }

    fn connectivity(&mut self, primary: bool) -> Vec<Command> {
        self.core.on_connectivity(primary, vec![], self.now)
    }
}

fn admissions(cmds: &[Command]) -> Vec<&Admission> {
    cmds.iter().filter_map(|c| if let Command::Admit(a) = c { Some(a) } else { None }).collect()
}

fn submitted(cmds: &[Command]) -> Vec<&Body> {
    cmds.iter().filter_map(|c| if let Command::Submit(b) = c { Some(b) } else { None }).collect()
}

fn applied(cmds: &[Command]) -> Vec<Seqno> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::WriteSet { seqno, apply: true, .. } => Some(*seqno),
            Command::Queue(Task::View(v)) => Some(v.state_id.seqno),
            _ => None,
        })
        .collect()
}

/// A two-member group with `OTHER` as founder and `writes` write-sets; this
/// node's core (incarnation 1, no data) looks on. Returns the harness with
/// this node added (admitted by transfer) and the seqno of its join view.
fn group_with_me(writes: usize) -> (Harness, Seqno) {
    let mut h = Harness::new(NodeCore::new(uuid(ME), 1, Gtid::UNDEFINED, String::new(), true));
    h.members(vec![(OTHER, info(OTHER, 1, Gtid::UNDEFINED))]);
    for _ in 0..writes {
        h.remote_write();
    }
    let cmds = h.members(vec![(ME, info(ME, 1, Gtid::UNDEFINED))]);
    let view = h.state.seqno;
    assert_eq!(admissions(&cmds).len(), 1);
    (h, view)
}

#[test]
fn a_founder_is_admitted_as_such_and_synced_once_connected() {
    let mut h = Harness::new(NodeCore::new(uuid(ME), 1, Gtid::UNDEFINED, String::new(), true));
    let cmds = h.members(vec![(ME, info(ME, 1, Gtid::UNDEFINED))]);
    let a = admissions(&cmds);
    assert_eq!(a.len(), 1);
    assert_eq!((&a[0].plan, a[0].view.state_id.seqno), (&Plan::Found, 1));
    h.core.on_connected(&Plan::Found);
    assert_eq!(h.core.state, LocalState::Synced);
    assert!(!h.core.awaits_synced());
}

#[test]
fn a_new_node_without_data_is_given_a_state_transfer_and_nothing_before_its_view() {
    let mut h = Harness::new(NodeCore::new(uuid(ME), 1, Gtid::UNDEFINED, String::new(), true));
    h.members(vec![(OTHER, info(OTHER, 1, Gtid::UNDEFINED))]);
    let before: Vec<Command> = (0..5).flat_map(|_| h.remote_write()).collect();
    assert!(applied(&before).is_empty(), "the transfer brings these: {before:?}");
    let cmds = h.members(vec![(ME, info(ME, 1, Gtid::UNDEFINED))]);
    assert_eq!(admissions(&cmds)[0].plan, Plan::Transfer);
    assert!(h.core.is_live());
    let after = h.remote_write();
    assert_eq!(applied(&after), vec![h.state.seqno], "what follows the view is applied");
}

/// The group as it was when this node stopped: founder ME (incarnation 1),
/// OTHER, `writes` write-sets. Returns the state as a checkpoint taken after
/// `checkpoint_after` write-sets, and the remaining events to replay.
fn history(writes: usize, checkpoint_after: usize) -> (Vec<u8>, Vec<Vec<u8>>, Uuid) {
    let mut s = GroupState::default();
    let mut members = BTreeMap::new();
    members.insert(ME as u64, info(ME, 1, Gtid::UNDEFINED));
    s.apply(Ordered::Membership(Membership { voters: vec![1], learners: vec![], members: members.clone() }));
    members.insert(OTHER as u64, info(OTHER, 1, Gtid::UNDEFINED));
    s.apply(Ordered::Membership(Membership { voters: vec![1, 2], learners: vec![], members }));
    let mut checkpoint = s.encode();
    let mut rest = vec![];
    for i in 0..writes {
        let payload = envelope(OTHER, 1, 0, write_set(OTHER, s.seqno, i as u8, 10));
        if i < checkpoint_after {
            s.apply(Ordered::Message { origin: OTHER as u64, payload: &payload });
            checkpoint = s.encode();
        } else {
            rest.push(payload);
        }
    }
    (checkpoint, rest, s.group_uuid)
}

#[test]
fn a_restarted_node_replays_its_history_and_resumes_at_its_own_position() {
    let (checkpoint, rest, history_uuid) = history(10, 3);
    // The data is at seqno 8: write-sets 1..=6 of the history (seqnos 3..=8).
    let start = Gtid { uuid: history_uuid, seqno: 8 };
    let mut h = Harness::new(NodeCore::new(uuid(ME), 2, start, String::new(), true));
    h.state = GroupState::decode(&checkpoint).unwrap();
    assert!(admissions(&h.core.on_restored(&h.state)).is_empty());
    let mut replayed = vec![];
    for payload in &rest {
        let outcome = h.state.apply(Ordered::Message { origin: OTHER as u64, payload });
        replayed.extend(h.core.on_ordered(outcome, &h.state));
    }
    assert_eq!(applied(&replayed), vec![9, 10, 11, 12], "only what the data lacks");
    assert!(admissions(&replayed).is_empty(), "not before the group is heard");
    let cmds = h.connectivity(true);
    let a = admissions(&cmds);
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].plan, Plan::Resume { position: 8 });
    assert_eq!(a[0].view.state_id.seqno, 8, "connected at its own position");
    // The server takes its own id from this view: it must name this
    // process (incarnation 2), as the group's views will from the rejoin on.
    let me_in = |v: &ViewChange| v.members.iter().find(|m| m.uuid == uuid(ME)).map(|m| m.node_id());
    let this_process = Some(crate::view::node_id(uuid(ME), 2));
    assert_eq!(me_in(&a[0].view), this_process, "connected as this process, not the one before");
    assert_eq!(submitted(&cmds), vec![&Body::Rejoin { position: 8 }], "the group learns of the new incarnation");
    h.core.on_connected(&Plan::Resume { position: 8 });
    // The rejoin comes back ordered: the view that makes this process live.
    let cmds = h.message(ME, 2, 0, Body::Rejoin { position: 8 });
    let rejoin_view = cmds.iter().find_map(|c| if let Command::Queue(Task::View(v)) = c { Some(v) } else { None });
    assert_eq!(rejoin_view.and_then(me_in), this_process, "the group's view names the same process");
    assert!(h.core.is_live());
    assert_eq!(applied(&cmds), vec![13], "the rejoin view follows the IST in order");
    assert_eq!(submitted(&cmds), vec![&Body::State(MemberState::Synced)]);
    // The IST ends before the view that made this process live.
    assert_eq!(h.core.ist_range(), Some((9, 12)));
    assert!(h.core.ist_receiving());
    // While it applies the IST it reports how far it got, once a second.
    let reports = progress_reports;
    assert_eq!(reports(&h.tick(2_000, 10)), 1);
    assert_eq!(reports(&h.tick(500, 11)), 0, "not again so soon");
    assert_eq!(reports(&h.tick(2_000, 11)), 1);
    assert_eq!(reports(&h.tick(2_000, 11)), 0, "no progress, nothing to say");
    let cmds = h.message(ME, 2, 0, Body::State(MemberState::Synced));
    assert_eq!(cmds, vec![Command::Queue(Task::Synced { after: 13 })]);
    assert!(!h.core.awaits_synced());
    // Applied: the status is empty, the range stays for the metrics.
    h.tick(2_000, 12);
    assert!(!h.core.ist_receiving());
    assert_eq!(h.core.ist_range(), Some((9, 12)));
}

#[test]
fn data_older_than_the_replayable_history_falls_back_to_a_state_transfer() {
    let (checkpoint, rest, history_uuid) = history(10, 5);
    // The checkpoint is at seqno 7; the data at 4 cannot be caught up.
    let start = Gtid { uuid: history_uuid, seqno: 4 };
    let mut h = Harness::new(NodeCore::new(uuid(ME), 2, start, String::new(), true));
    h.state = GroupState::decode(&checkpoint).unwrap();
    h.core.on_restored(&h.state);
    for payload in &rest {
        let outcome = h.state.apply(Ordered::Message { origin: OTHER as u64, payload });
        assert!(applied(&h.core.on_ordered(outcome, &h.state)).is_empty());
    }
    let cmds = h.connectivity(true);
    assert!(admissions(&cmds).is_empty());
    assert_eq!(submitted(&cmds), vec![&Body::Rejoin { position: 4 }]);
    let cmds = h.message(ME, 2, 0, Body::Rejoin { position: 4 });
    assert_eq!(admissions(&cmds)[0].plan, Plan::Transfer);
}

#[test]
fn data_ahead_of_the_group_is_refused_at_the_admitting_view() {
    let (checkpoint, _, history_uuid) = history(4, 4);
    let start = Gtid { uuid: history_uuid, seqno: 50 };
    let mut h = Harness::new(NodeCore::new(uuid(ME), 2, start, String::new(), true));
    h.state = GroupState::decode(&checkpoint).unwrap();
    h.core.on_restored(&h.state);
    h.connectivity(true);
    let cmds = h.message(ME, 2, 0, Body::Rejoin { position: 50 });
    assert!(matches!(cmds.as_slice(), [Command::RestartRequired(why)] if why.contains("diverged")), "{cmds:?}");
}

#[test]
fn a_large_backlog_is_resumed_without_waiting_for_the_group() {
    let (checkpoint, rest, history_uuid) = history(10, 0);
    let start = Gtid { uuid: history_uuid, seqno: 2 };
    let mut core = NodeCore::new(uuid(ME), 2, start, String::new(), true);
    core.admit_budget_bytes = 25;
    let mut h = Harness::new(core);
    h.state = GroupState::decode(&checkpoint).unwrap();
    h.core.on_restored(&h.state);
    let mut seen = vec![];
    for payload in &rest {
        let outcome = h.state.apply(Ordered::Message { origin: OTHER as u64, payload });
        seen.extend(h.core.on_ordered(outcome, &h.state));
        if !admissions(&seen).is_empty() {
            break;
        }
    }
    let a = admissions(&seen);
    assert_eq!(a.len(), 1, "admitted once 3 write-sets of 10 bytes are held");
    assert_eq!(a[0].plan, Plan::Resume { position: 2 });
    assert_eq!(applied(&seen).len(), 3);
}

#[test]
fn a_snapshot_after_resuming_requires_a_restart() {
    let (checkpoint, rest, history_uuid) = history(10, 3);
    let mut h = Harness::new(NodeCore::new(uuid(ME), 2, Gtid { uuid: history_uuid, seqno: 5 }, String::new(), true));
    h.state = GroupState::decode(&checkpoint).unwrap();
    h.core.on_restored(&h.state);
    h.connectivity(true);
    assert!(h.core.admission().is_some());
    for payload in &rest {
        h.state.apply(Ordered::Message { origin: OTHER as u64, payload });
    }
    // The leader's snapshot jumps over what the node was replaying.
    let mut jumped = h.state.clone();
    jumped.seqno += 100;
    let cmds = h.core.on_restored(&jumped);
    assert!(matches!(cmds.as_slice(), [Command::RestartRequired(_)]), "{cmds:?}");
}

#[test]
fn messages_of_a_previous_incarnation_wake_no_waiter_but_their_write_sets_apply() {
    let (mut h, _) = group_with_me(2);
    let seen = h.state.seqno;
    // Sent by incarnation 0 of ME (unknown to the group as such): still a
    // transaction, but nobody in this process waits for token 7.
    let cmds = h.message(ME, 0, 7, write_set(ME, seen, 1, 10));
    assert!(matches!(cmds.as_slice(), [Command::WriteSet { waiter: None, apply: true, .. }]), "{cmds:?}");
    let cmds = h.message(ME, 1, 8, write_set(ME, seen + 1, 2, 10));
    assert!(matches!(cmds.as_slice(), [Command::WriteSet { waiter: Some(8), .. }]), "{cmds:?}");
    assert!(h.message(ME, 0, 9, Body::Causal).is_empty());
    assert_eq!(
        h.message(ME, 1, 9, Body::Causal),
        vec![Command::Reply { token: 9, reply: Reply::Causal(h.state.seqno) }]
    );
}

#[test]
fn a_cut_off_node_asks_for_a_fresh_view_until_one_is_ordered() {
    let (mut h, _) = group_with_me(1);
    h.connectivity(true);
    let cmds = h.connectivity(false);
    assert_eq!(
        cmds,
        vec![Command::Queue(Task::NonPrimary { after: h.state.seqno, removal: None }), Command::WakeWaiters]
    );
    let cmds = h.connectivity(true);
    assert_eq!(submitted(&cmds), vec![&Body::ViewBump]);
    assert!(submitted(&h.tick(1_000, -1)).is_empty(), "not again within two seconds");
    assert_eq!(submitted(&h.tick(1_000, -1)), vec![&Body::ViewBump]);
    h.message(ME, 1, 0, Body::ViewBump);
    assert!(submitted(&h.tick(3_000, -1)).is_empty(), "a view was ordered: done");
}

#[test]
fn the_synced_announcement_repeats_until_ordered_and_waits_while_cut_off() {
    let (mut h, _) = group_with_me(0);
    h.core.on_connected(&Plan::Transfer);
    assert!(submitted(&h.core.on_state_received()).is_empty(), "not primary yet");
    assert_eq!(submitted(&h.connectivity(true)), vec![&Body::State(MemberState::Synced)]);
    assert_eq!(submitted(&h.tick(2_000, -1)), vec![&Body::State(MemberState::Synced)], "lost? again");
    h.connectivity(false);
    assert!(submitted(&h.tick(2_000, -1)).is_empty(), "waits while cut off");
    // Back: at once, together with the request for a fresh view.
    assert_eq!(submitted(&h.connectivity(true)), vec![&Body::State(MemberState::Synced), &Body::ViewBump]);
    h.message(ME, 1, 0, Body::State(MemberState::Synced));
    let later = h.tick(5_000, -1);
    assert!(!submitted(&later).contains(&&Body::State(MemberState::Synced)), "ordered: no more repeats");
    assert!(h.core.on_synced_reached());
    assert!(!h.core.on_synced_reached(), "a repeated announcement changes nothing");
}

#[test]
fn the_log_is_released_only_once_the_server_is_in_step_and_never_past_a_freeze() {
    let (mut h, _) = group_with_me(0);
    let mut fresh = NodeCore::new(uuid(ME), 1, Gtid::UNDEFINED, String::new(), true);
    assert!(fresh.on_tick(60_000, 5).is_empty(), "not admitted: nothing is released");
    h.core.freeze_purge_at(4);
    let released: Vec<Seqno> = (0..20)
        .flat_map(|i| h.tick(1_000, i))
        .filter_map(|c| if let Command::ReleaseLog(s) = c { Some(s) } else { None })
        .collect();
    assert_eq!(released, vec![0, 1, 2, 3], "settled commits, below the freeze");
}

fn progress_reports(cmds: &[Command]) -> usize {
    cmds.iter().filter(|c| matches!(c, Command::ReportProgress)).count()
}

/// The group purges its certification index below the members' reports;
/// a live node reports by the clock too, so a quiet spell after a burst
/// does not leave the burst's keys indexed.
#[test]
fn a_live_node_reports_its_progress_once_a_second_while_it_moves() {
    let (mut h, _) = group_with_me(3);
    assert_eq!(progress_reports(&h.tick(1_000, 5)), 0, "not primary yet: the group would not take it");
    h.connectivity(true);
    assert_eq!(progress_reports(&h.tick(1_000, 5)), 1);
    assert_eq!(progress_reports(&h.tick(300, 6)), 0, "not again so soon");
    assert_eq!(progress_reports(&h.tick(1_000, 6)), 1, "the commit in between is reported");
    assert_eq!(progress_reports(&h.tick(5_000, 6)), 0, "a quiet node has nothing new to say");
    h.connectivity(false);
    assert_eq!(progress_reports(&h.tick(1_000, 7)), 0, "cut off");
    h.connectivity(true);
    assert_eq!(progress_reports(&h.tick(1_000, 7)), 1, "back in the primary component");
    h.core.close();
    assert_eq!(progress_reports(&h.tick(1_000, 9)), 0, "closing");
    let mut fresh = NodeCore::new(uuid(ME), 1, Gtid::UNDEFINED, String::new(), true);
    assert_eq!(progress_reports(&fresh.on_tick(60_000, 5)), 0, "not a member: nothing to report");
}

#[test]
fn desync_tells_the_group_once_and_resync_announces_synced_again() {
    let (mut h, _) = group_with_me(0);
    h.connectivity(true);
    h.core.on_connected(&Plan::Transfer);
    h.core.on_state_received();
    h.message(ME, 1, 0, Body::State(MemberState::Synced));
    assert!(h.core.on_synced_reached());
    assert_eq!(h.core.desync(), vec![Command::Submit(Body::State(MemberState::Donor))]);
    assert!(h.core.desync().is_empty());
    assert_eq!(h.core.state, LocalState::Donor);
    assert!(h.core.resync().is_empty(), "still desynced once");
    assert_eq!(submitted(&h.core.resync()), vec![&Body::State(MemberState::Synced)]);
    assert_eq!(h.core.state, LocalState::Joined);
}

/// Every seqno the node's monitors are to pass, in order: write-sets and
/// views it applies, and the view that removed it (which the server never sees).
fn passed(cmds: &[Command]) -> Vec<Seqno> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::WriteSet { seqno, apply: true, .. } => Some(*seqno),
            Command::Queue(Task::View(v)) => Some(v.state_id.seqno),
            Command::Queue(Task::NonPrimary { removal: Some(s), .. }) => Some(*s),
            Command::Queue(Task::Pass { seqno }) => Some(*seqno),
            _ => None,
        })
        .collect()
}

#[test]
fn a_removed_node_is_taken_back_live_and_passes_every_seqno_in_between() {
    let (mut h, _) = group_with_me(1);
    h.core.on_connected(&Plan::Transfer);
    h.connectivity(true);
    h.core.desync();
    h.connectivity(false);
    let mut cmds = h.remove(ME);
    let removal = h.state.seqno;
    assert!(
        cmds.contains(&Command::Queue(Task::NonPrimary { after: removal - 1, removal: Some(removal) })),
        "the removal reaches the server as a non-primary view: {cmds:?}"
    );
    for _ in 0..3 {
        cmds.extend(h.remote_write());
    }
    // Taken back with the same process: no new admission, no restart.
    let back = h.members(vec![(ME, info(ME, 1, Gtid::UNDEFINED))]);
    assert!(admissions(&back).is_empty(), "{back:?}");
    assert!(!back.iter().any(|c| matches!(c, Command::RestartRequired(_))), "{back:?}");
    cmds.extend(back);
    assert_eq!(passed(&cmds), (removal..=h.state.seqno).collect::<Vec<_>>(), "dense, in order");
    let Some(Command::Queue(Task::View(v))) = cmds.last() else {
        panic!("ends with the view that takes it back: {cmds:?}")
    };
    assert!(v.members.iter().any(|m| m.uuid == uuid(ME)));
    assert_eq!(h.state.member(uuid(ME)).map(|m| m.incarnation), Some(1));
    assert_eq!(h.core.desyncs, 0, "the removal cleared the desync, as a state transfer does in Galera");
}

/// The view of this node's own graceful leave reaches no server, but its
/// seqno is passed in order with what came before: the drain before the
/// final view waits until every seqno ordered here has left, and waited
/// in vain for this one (5 s on every clean stop that saw it).
#[test]
fn the_view_of_its_own_leave_is_passed_in_order() {
    let (mut h, _) = group_with_me(1);
    h.core.on_connected(&Plan::Transfer);
    h.connectivity(true);
    let first = h.state.seqno + 1;
    let mut cmds = h.remote_write();
    h.core.close();
    cmds.extend(h.remote_write());
    let leave = h.remove(ME);
    assert!(
        matches!(leave.as_slice(), [Command::Queue(Task::Pass { seqno })] if *seqno == h.state.seqno),
        "nothing for the server, the seqno for the monitors: {leave:?}"
    );
    cmds.extend(leave);
    assert_eq!(passed(&cmds), (first..=h.state.seqno).collect::<Vec<_>>(), "dense, in order");
}

/// The partition test's isolated leader: the member reached the group
/// again (the group reports it primary, and reports nothing more) before
/// the view that removed it while it was cut off was delivered. Taken
/// back, it must resync by itself: nothing else will tell it it is primary.
#[test]
fn a_removal_delivered_after_the_member_is_back_does_not_cut_it_off_for_good() {
    let (mut h, _) = group_with_me(1);
    h.core.on_connected(&Plan::Transfer);
    h.core.on_state_received();
    h.connectivity(true);
    h.message(ME, 1, 1, Body::State(MemberState::Synced));
    h.core.on_synced_reached();
    h.connectivity(false);
    h.core.on_non_primary_delivered();
    h.connectivity(true);
    assert!(h.core.is_primary());
    h.remove(ME);
    h.core.on_non_primary_delivered();
    assert!(!h.core.is_primary(), "removed: out of the primary component, whatever the link says");
    assert!(h.core.cut_since_ms().is_some(), "clients waiting on it give up in time");
    h.tick(3_000, 2);
    let back = h.members(vec![(ME, info(ME, 1, Gtid::UNDEFINED))]);
    let Some(Command::Queue(Task::View(view))) = back.last() else { panic!("taken back with a view: {back:?}") };
    let view = view.clone();
    assert!(h.core.is_primary());
    assert_eq!(h.core.cut_since_ms(), None);
    let announced = h.core.on_view_delivered(&view);
    assert_eq!(submitted(&announced), vec![&Body::State(MemberState::Synced)], "resyncs without another link event");
    assert!(h.core.awaits_synced());
}

#[test]
fn an_announcement_the_group_refused_goes_again_at_the_next_tick() {
    let (mut h, _) = group_with_me(0);
    h.core.on_connected(&Plan::Transfer);
    h.core.on_state_received();
    let first = h.connectivity(true);
    assert_eq!(submitted(&first), vec![&Body::State(MemberState::Synced)]);
    assert!(submitted(&h.tick(100, -1)).is_empty(), "sent: not again within the resend period");
    // The shell found the group not accepting yet.
    h.core.on_submit_refused();
    assert_eq!(submitted(&h.tick(100, -1)), vec![&Body::State(MemberState::Synced)]);
}

fn votes(cmds: &[Command]) -> Vec<(Seqno, u64)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::Submit(Body::Vote { seqno, code, .. }) => Some((*seqno, *code)),
            _ => None,
        })
        .collect()
}

const FAILED: u64 = (1 << 63) | 42;

#[test]
fn a_node_answers_a_ballot_after_applying_and_the_odd_one_out_is_told() {
    let (mut h, _) = group_with_me(0);
    h.message(ME, 1, 8, Body::State(MemberState::Synced)); // counted as a voter
    h.remote_write();
    let ws = h.state.seqno;
    // OTHER failed to apply it.
    h.message(OTHER, 1, 9, Body::Vote { seqno: ws, code: FAILED, reason: "dup".into(), policy: 0 });
    assert!(votes(&h.core.on_votes(&h.state.ballots, ws - 1)).is_empty(), "not applied here yet");
    let cmds = h.core.on_votes(&h.state.ballots, ws);
    assert_eq!(votes(&cmds), vec![(ws, crate::voting::SUCCESS)]);
    // Our answer comes back ordered: 1:1, success wins; we agree with it.
    h.message(ME, 1, 10, Body::Vote { seqno: ws, code: crate::voting::SUCCESS, reason: String::new(), policy: 0 });
    let cmds = h.core.on_votes(&h.state.ballots, ws);
    assert!(cmds.contains(&Command::VotesChanged));
    assert!(!cmds.iter().any(|c| matches!(c, Command::Inconsistent { .. })), "{cmds:?}");
    assert_eq!(h.core.vote_decision(ws), Some(crate::voting::SUCCESS));
}

#[test]
fn a_lone_failure_here_makes_this_node_leave() {
    let (mut h, _) = group_with_me(0);
    h.message(ME, 1, 8, Body::State(MemberState::Synced)); // counted as a voter
    h.remote_write();
    let ws = h.state.seqno;
    let cmds = h.core.vote_failed(ws, FAILED, "Duplicate entry".into(), ws - 1, 0);
    assert_eq!(votes(&cmds), vec![(ws, FAILED)]);
    h.message(ME, 1, 10, Body::Vote { seqno: ws, code: FAILED, reason: "Duplicate entry".into(), policy: 0 });
    assert!(h.core.on_votes(&h.state.ballots, ws - 1).iter().all(|c| !matches!(c, Command::Inconsistent { .. })));
    h.message(OTHER, 1, 11, Body::Vote { seqno: ws, code: crate::voting::SUCCESS, reason: String::new(), policy: 0 });
    let cmds = h.core.on_votes(&h.state.ballots, ws - 1);
    assert!(
        cmds.contains(&Command::Inconsistent { seqno: ws, mine: FAILED, winner: crate::voting::SUCCESS }),
        "{cmds:?}"
    );
    assert_eq!(h.core.undecided_failure(), None);
}

#[test]
fn a_seqno_the_group_voted_failed_is_skipped_by_a_node_catching_up() {
    let (mut h, _) = group_with_me(0);
    h.remote_write();
    let ws = h.state.seqno;
    h.message(OTHER, 1, 9, Body::Vote { seqno: ws, code: FAILED, reason: "x".into(), policy: 0 });
    // ME is a joiner (not counted): OTHER's failure alone decides.
    h.core.on_votes(&h.state.ballots, ws - 5);
    assert_eq!(h.core.vote_decision(ws), Some(FAILED));
    assert!(h.core.skips(ws), "the majority rolled it back");
    assert!(!h.core.skips(ws - 1));
    let cmds = h.core.on_votes(&h.state.ballots, ws);
    assert!(!cmds.iter().any(|c| matches!(c, Command::Inconsistent { .. })), "{cmds:?}");
}

#[test]
fn an_arbitrator_never_votes() {
    let (mut h, _) = group_with_me(0);
    h.core.votes_enabled = false;
    h.remote_write();
    let ws = h.state.seqno;
    h.message(OTHER, 1, 9, Body::Vote { seqno: ws, code: FAILED, reason: "x".into(), policy: 0 });
    assert!(votes(&h.core.on_votes(&h.state.ballots, ws)).is_empty());
}

// ---- invariants (core/invariants.rs) -----------------------------------------

#[test]
#[should_panic(expected = "invariant broken: an ordered event moved the seqno from 4 to 6")]
fn an_ordered_event_that_skips_a_seqno_breaks_an_invariant() {
    let (mut h, view) = group_with_me(2);
    assert_eq!(view, 4);
    h.state.seqno += 1; // as if the group state had lost an event
    h.remote_write();
}

#[test]
#[should_panic(expected = "invariant broken: an outcome at seqno 9 while the group state is at 4")]
fn an_outcome_at_another_seqno_than_the_states_breaks_an_invariant() {
    let (mut h, _) = group_with_me(2);
    let outcome = Outcome::Causal { from: Sender { uuid: uuid(OTHER), incarnation: 1 }, token: 1, seqno: 9 };
    h.core.on_ordered(outcome, &h.state);
}

#[test]
#[should_panic(expected = "invariant broken: an admitted process lost its admission")]
fn an_admission_taken_back_breaks_an_invariant() {
    let (mut h, _) = group_with_me(0);
    h.core.admission = None;
    h.tick(100, -1);
}

#[test]
fn the_invariants_hold_through_a_join_a_cut_and_a_removal() {
    let (mut h, view) = group_with_me(3);
    h.core.on_joining(&h.state.current_view());
    h.core.on_connected(&Plan::Transfer);
    h.core.on_donor_found();
    h.core.on_state_received();
    h.connectivity(true);
    h.tick(100, view);
    h.connectivity(false);
    h.connectivity(true);
    h.remove(ME);
    assert_eq!(h.core.check_invariants(), Ok(()));
    // And what a check finds is what was broken.
    h.core.held_bytes = 10;
    let why = h.core.check_invariants().unwrap_err();
    assert_eq!(why, "admitted with 10 bytes of write-sets still held");
}

/// A release build does not panic: it logs the invariant once and asks for
/// a restart, with the commands of the input that broke it or, where that
/// input returns none, of the next one.
#[test]
fn in_a_release_build_a_broken_invariant_asks_for_a_restart_once() {
    let (mut h, _) = group_with_me(0);
    h.core.panic_on_broken = false;
    h.core.held_bytes = 10;
    h.core.on_submit_refused(); // returns no commands
    let restarts = |cmds: &[Command]| cmds.iter().filter(|c| matches!(c, Command::RestartRequired(_))).count();
    let cmds = h.tick(100, -1);
    assert_eq!(restarts(&cmds), 1, "{cmds:?}");
    let Some(Command::RestartRequired(why)) = cmds.iter().find(|c| matches!(c, Command::RestartRequired(_))) else {
        unreachable!()
    };
    assert!(why.contains("invariant broken: admitted with 10 bytes"), "{why}");
    assert_eq!(restarts(&h.tick(100, -1)), 0, "asked once");
}

/// The local state in the words of Galera's state machine, as its
/// "Shifting A -> B (TO: n)" lines show it, at each step of a join by state
/// transfer, a desync and a clean stop; each change is logged once.
#[test]
fn the_local_state_reads_in_galera_words_at_each_step() {
    let mut h = Harness::new(NodeCore::new(uuid(ME), 1, Gtid::UNDEFINED, String::new(), true));
    h.members(vec![(OTHER, info(OTHER, 1, Gtid::UNDEFINED))]);
    assert_eq!(h.core.galera_state(), "OPEN");
    h.connectivity(true);
    assert_eq!(h.core.galera_state(), "PRIMARY");
    assert_eq!(admissions(&h.members(vec![(ME, info(ME, 1, Gtid::UNDEFINED))]))[0].plan, Plan::Transfer);
    let mut seen = vec![h.core.logged_galera_state];
    let mut step = |h: &mut Harness, f: &dyn Fn(&mut NodeCore)| {
        f(&mut h.core);
        assert_eq!(h.core.logged_galera_state, h.core.galera_state(), "logged as it changed");
        seen.push(h.core.galera_state());
    };
    step(&mut h, &|c| c.on_connected(&Plan::Transfer));
    step(&mut h, &|c| c.on_donor_found());
    step(&mut h, &|c| drop(c.on_state_received()));
    step(&mut h, &|c| assert!(c.on_synced_reached()));
    step(&mut h, &|c| drop(c.desync()));
    step(&mut h, &|c| drop(c.resync()));
    step(&mut h, &|c| c.close());
    step(&mut h, &|c| c.on_final());
    let words = ["PRIMARY", "JOINER", "JOINER", "JOINED", "SYNCED", "DONOR/DESYNCED", "JOINED", "JOINED", "CLOSED"];
    assert_eq!(seen, words);
}

/// A connection that ended with the server in step says so, so that the
/// next connection in the same process starts from what the server
/// committed (`Node::current_position`); one that ended while the server
/// still waited for its state does not.
#[test]
fn a_connection_remembers_whether_it_ended_in_step() {
    let (mut h, _) = group_with_me(2);
    h.core.on_connected(&Plan::Transfer);
    h.core.on_final();
    assert!(!h.core.ended_in_step(), "ended waiting for a state transfer");
    let (mut h, _) = group_with_me(2);
    h.core.on_connected(&Plan::Transfer);
    drop(h.core.on_state_received());
    h.core.on_final();
    assert!(h.core.ended_in_step(), "ended joined");
    let mut h = Harness::new(NodeCore::new(uuid(ME), 1, Gtid::UNDEFINED, String::new(), true));
    h.members(vec![(ME, info(ME, 1, Gtid::UNDEFINED))]);
    h.core.on_connected(&Plan::Found);
    h.core.on_final();
    assert!(h.core.ended_in_step(), "ended synced");
}
