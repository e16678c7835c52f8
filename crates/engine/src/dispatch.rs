//! The adapter through which the group drives this node: each ordered event
//! goes through the replicated state ([`GroupState`]), then the node's core
//! decides what the outcome means here, and the shell carries that out.
//! Calls are serialised by the group, so commands of ordered events are
//! carried out in order.

use tandem_group::{Connectivity, Ordered, Replica};

use crate::callback::Inside;
use crate::group_state::{GroupState, Outcome};
use crate::node::Node;
use crate::stats::Stats;

/// The deterministic replica the group drives.
pub(crate) struct NodeReplica {
    pub(crate) node: Node,
    pub(crate) state: GroupState,
    /// Flow control as last handed to the node: (paused, by us, members).
    pub(crate) flow_seen: (bool, bool, usize),
}

impl NodeReplica {
    pub(crate) fn new(node: Node) -> NodeReplica {
        NodeReplica { node, state: GroupState::default(), flow_seen: (false, false, 0) }
    }

    /// Tells the node's flow-control gate when the ordered state changed.
    fn observe_flow_control(&mut self) {
        let me = self.node.me();
        let now = (self.state.paused(), self.state.paused_by.contains(&me), self.state.members.len());
        if now != self.flow_seen {
            self.flow_seen = now;
            self.node.observe_flow_control(now.0, now.1, now.2);
        }
    }
}

impl Replica for NodeReplica {
    fn apply(&mut self, event: Ordered<'_>) {
        let _inside = Inside::enter();
        let outcome = self.state.apply(event);
        if matches!(outcome, Outcome::FlowControl { pause: true, .. }) {
            Stats::add(&self.node.inner.stats.flow_control_recv, 1);
        }
        let commands = {
            let mut core = self.node.inner.core.lock();
            let mut commands = core.on_ordered(outcome, &self.state);
            // Votes are rare: the apply position is only read when one moved.
            if core.votes_moved(&self.state.ballots) {
                let applied = self.node.inner.apply.last_left();
                commands.extend(core.on_votes(&self.state.ballots, applied));
            }
            commands
        };
        self.node.execute(commands);
        self.observe_flow_control();
    }

    fn snapshot(&self) -> Vec<u8> {
        self.state.encode()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        let _inside = Inside::enter();
        self.state = GroupState::decode(snapshot)?;
        let commands = {
            let mut core = self.node.inner.core.lock();
            let mut commands = core.on_restored(&self.state);
            // Votes are rare: the apply position is only read when one moved.
            if core.votes_moved(&self.state.ballots) {
                let applied = self.node.inner.apply.last_left();
                commands.extend(core.on_votes(&self.state.ballots, applied));
            }
            commands
        };
        self.node.execute(commands);
        self.observe_flow_control();
        Ok(())
    }

    fn connectivity(&mut self, now: Connectivity) {
        let _inside = Inside::enter();
        // The members still in touch: a non-primary view lists them, as
        // Galera's does (the ordered state knows them by group id).
        let reachable = match &now {
            Connectivity::Primary => vec![],
            Connectivity::NonPrimary { reachable } => self
                .state
                .members
                .iter()
                .filter(|m| reachable.contains(&m.id))
                .map(|m| crate::view::ViewMember {
                    uuid: m.uuid,
                    incarnation: m.incarnation,
                    name: m.name.clone(),
                    incoming: m.incoming.clone(),
                })
                .collect(),
        };
        self.node.on_connectivity(matches!(now, Connectivity::Primary), reachable);
    }

    fn position(&self) -> i64 {
        self.state.seqno
    }

    /// Only a full applier queue makes `apply` wait: everything else it does
    /// takes locks held for moments and hands work to other threads.
    fn apply_may_wait(&self, payload_bytes: usize) -> bool {
        !self.node.inner.queue.has_room(payload_bytes)
    }
}
