//! The adapter through which the group drives this node: each ordered event
//! goes through the replicated state ([`GroupState`]), then the node's core
//! decides what the outcome means here, and the shell carries that out.
//! Calls are serialised by the group, so commands of ordered events are
//! carried out in order.

use tandem_group::{Connectivity, Ordered, Replica};

use crate::group_state::GroupState;
use crate::node::Node;

/// The deterministic replica the group drives.
pub(crate) struct NodeReplica {
    pub(crate) node: Node,
    pub(crate) state: GroupState,
}

impl Replica for NodeReplica {
    fn apply(&mut self, event: Ordered<'_>) {
        let outcome = self.state.apply(event);
        let commands = self.node.inner.core.lock().on_ordered(outcome, &self.state);
        self.node.execute(commands);
    }

    fn snapshot(&self) -> Vec<u8> {
        self.state.encode()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        self.state = GroupState::decode(snapshot)?;
        let commands = self.node.inner.core.lock().on_restored(&self.state);
        self.node.execute(commands);
        Ok(())
    }

    fn connectivity(&mut self, now: Connectivity) {
        self.node.on_connectivity(matches!(now, Connectivity::Primary));
    }

    fn position(&self) -> i64 {
        self.state.seqno
    }
}
