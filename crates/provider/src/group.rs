//! Which group channel the provider runs on.

use std::sync::Arc;

use tandem_engine::local_group::LocalHub;
use tandem_engine::node::GroupFactory;
use tandem_group::GroupChannel;

/// The in-process hub, for a single node without the network.
pub fn factory() -> GroupFactory {
    Box::new(|config, replica| {
        let hub = LocalHub::new();
        let member: Arc<dyn GroupChannel> = hub.join(config, replica);
        Ok(member)
    })
}
