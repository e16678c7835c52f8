//! Random walks of the core: the group's ordered events, connectivity,
//! ticks whose clock jumps ahead by hours or back, lost submissions, other
//! members coming and going, operators' desyncs, and the server's steps in
//! whatever order the shell reaches them. The core's invariants are checked
//! after every input (`core/invariants.rs`; a debug build panics on a broken
//! one), and the walk checks what the server is handed: no seqno twice, and
//! seqnos in order. A failing walk is shrunk and replayed by proptest.

use std::collections::VecDeque;

use proptest::prelude::*;

use super::*;

const THIRD: u8 = 3;

#[derive(Clone, Debug)]
enum Step {
    RemoteWrite,
    /// A write-set of this node's, ordered at once.
    MyWrite,
    /// Time moves by this many ms; negative: the clock went back.
    Tick(i64),
    Connectivity(bool),
    /// The group orders the oldest submission of this node...
    OrderMine,
    /// ...or loses it (a leader change).
    LoseMine,
    /// The shell runs the oldest task the core queued.
    ServerWork,
    ThirdJoins,
    ThirdLeaves,
    /// The third member asks this node for a state transfer.
    ThirdAsksMe,
    /// The group removes this node, or takes it back.
    Removed(bool),
    Desync,
    Resync,
    OtherProgress,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => Just(Step::RemoteWrite),
        2 => Just(Step::MyWrite),
        4 => prop_oneof![Just(100i64), Just(1_000), Just(3_600_000), Just(-5_000)].prop_map(Step::Tick),
        2 => any::<bool>().prop_map(Step::Connectivity),
        5 => Just(Step::OrderMine),
        1 => Just(Step::LoseMine),
        6 => Just(Step::ServerWork),
        1 => Just(Step::ThirdJoins),
        1 => Just(Step::ThirdLeaves),
        2 => Just(Step::ThirdAsksMe),
        1 => any::<bool>().prop_map(Step::Removed),
        1 => Just(Step::Desync),
        1 => Just(Step::Resync),
        1 => Just(Step::OtherProgress),
    ]
}

/// What the shell would do with the core's commands, reduced to what moves
/// the core: submissions wait to be ordered, tasks wait for the appliers.
struct Shell {
    h: Harness,
    submitted: VecDeque<Body>,
    tasks: VecDeque<Task>,
    /// Joined by state transfer: the donor is still to be found (2), or
    /// the state is on its way (1).
    awaits_state: u8,
    /// The joiner this node donates to, until its script ends.
    donating: bool,
    desyncs: u32,
    /// Seqnos the server was handed, in order.
    handed: Vec<Seqno>,
}

impl Shell {
    fn run(&mut self, cmds: Vec<Command>) {
        for c in cmds {
            match c {
                Command::Submit(body) => self.submitted.push_back(body),
                // To the appliers' queue, behind the views before it.
                Command::WriteSet { seqno, apply: true, .. } => self.tasks.push_back(Task::Pass { seqno }),
                Command::Queue(task) => self.tasks.push_back(task),
                Command::Admit(a) => self.tasks.push_front(Task::Connect(a)),
                Command::RestartRequired(why) => panic!("restart required: {why}"),
                _ => {}
            }
        }
    }

    fn server_work(&mut self) {
        let Some(task) = self.tasks.pop_front() else {
            if self.awaits_state == 2 {
                self.awaits_state = 1;
                self.h.core.on_donor_found();
            } else if self.awaits_state == 1 {
                self.awaits_state = 0;
                let cmds = self.h.core.on_state_received();
                self.run(cmds);
            } else if std::mem::take(&mut self.donating) {
                let cmds = self.h.core.on_sst_sent(0);
                self.run(cmds);
            }
            return;
        };
        let core = &mut self.h.core;
        let cmds = match task {
            Task::Connect(a) => {
                core.on_joining(&a.view);
                core.on_connected(&a.plan);
                self.awaits_state = if a.plan == Plan::Transfer { 2 } else { 0 };
                vec![]
            }
            Task::View(vc) => {
                self.handed.push(vc.state_id.seqno);
                core.on_view_delivered(&vc)
            }
            Task::NonPrimary { .. } => {
                core.on_non_primary_delivered();
                vec![]
            }
            Task::Synced { .. } => {
                core.on_synced_reached();
                vec![]
            }
            Task::Donate { joiner, .. } => {
                core.on_donating(joiner);
                self.donating = true;
                vec![]
            }
            Task::Apply { seqno, .. } | Task::Pass { seqno } => {
                self.handed.push(seqno);
                vec![]
            }
            Task::Final | Task::RestartRequired => vec![],
        };
        self.run(cmds);
    }

    fn take(&mut self, step: Step) {
        let h = &mut self.h;
        let cmds = match step {
            Step::RemoteWrite => h.remote_write(),
            Step::MyWrite => {
                let seen = h.state.seqno;
                h.message(ME, 1, 0, write_set(ME, seen, 7, 10))
            }
            Step::Tick(ms) => {
                h.now = h.now.saturating_add_signed(ms);
                let committed = self.handed.last().copied().unwrap_or(-1);
                h.core.on_tick(h.now, committed)
            }
            Step::Connectivity(primary) => h.connectivity(primary),
            Step::OrderMine => match self.submitted.pop_front() {
                Some(body) => h.message(ME, 1, 0, body),
                None => vec![],
            },
            Step::LoseMine => {
                self.submitted.pop_front();
                vec![]
            }
            Step::ServerWork => {
                self.server_work();
                vec![]
            }
            Step::ThirdJoins => h.members(vec![(THIRD, info(THIRD, 1, Gtid::UNDEFINED))]),
            Step::ThirdLeaves => h.remove(THIRD),
            Step::ThirdAsksMe => {
                let mut cmds = h.members(vec![(THIRD, info(THIRD, 1, Gtid::UNDEFINED))]);
                let ask = Body::StateRequest { donors: format!("node{ME}"), request: vec![1] };
                cmds.extend(h.message(THIRD, 1, 0, ask));
                cmds
            }
            Step::Removed(true) => h.remove(ME),
            Step::Removed(false) => h.members(vec![(ME, info(ME, 1, Gtid::UNDEFINED))]),
            Step::Desync => {
                self.desyncs += 1;
                h.core.desync()
            }
            Step::Resync if self.desyncs > 0 => {
                self.desyncs -= 1;
                h.core.resync()
            }
            Step::Resync => vec![],
            Step::OtherProgress => {
                let at = h.state.seqno;
                h.message(OTHER, 1, 0, Body::Progress(at))
            }
        };
        self.run(cmds);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_walks_keep_the_invariants_and_hand_each_seqno_once_in_order(
        settled in any::<bool>(),
        steps in prop::collection::vec(step(), 1..120),
    ) {
        let mut h = Harness::new(NodeCore::new(uuid(ME), 1, Gtid::UNDEFINED, String::new(), true));
        h.members(vec![(OTHER, info(OTHER, 1, Gtid::UNDEFINED))]);
        h.remote_write();
        let mut shell = Shell {
            h,
            submitted: VecDeque::new(),
            tasks: VecDeque::new(),
            awaits_state: 0,
            donating: false,
            desyncs: 0,
            handed: vec![],
        };
        let cmds = shell.h.members(vec![(ME, info(ME, 1, Gtid::UNDEFINED))]);
        shell.run(cmds);
        if settled {
            // Half the walks start from a synced member, which can donate.
            shell.take(Step::Connectivity(true));
            for _ in 0..8 {
                shell.take(Step::ServerWork);
                shell.take(Step::OrderMine);
            }
            prop_assert_eq!(shell.h.core.state(), LocalState::Synced);
        }
        for s in steps {
            shell.take(s);
            prop_assert!(shell.handed.windows(2).all(|w| w[0] < w[1]), "handed out of order: {:?}", shell.handed);
        }
        prop_assert_eq!(shell.h.core.check_invariants(), Ok(()));
    }
}
