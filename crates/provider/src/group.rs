//! Which group channel the provider runs on: openraft over TCP, or (with
//! `TANDEM_GROUP=local`) an in-process hub for a single node without sockets.

use std::sync::Arc;

use tandem_engine::local_group::LocalHub;
use tandem_engine::node::GroupFactory;
use tandem_group::{GroupChannel, RaftGroup};

pub fn factory() -> GroupFactory {
    if std::env::var("TANDEM_GROUP").is_ok_and(|v| v == "local") {
        return Box::new(|config, replica| {
            let member: Arc<dyn GroupChannel> = LocalHub::new().join(config, replica);
            Ok(member)
        });
    }
    Box::new(|config, replica| {
        let group: Arc<dyn GroupChannel> = RaftGroup::start(config, replica)?;
        Ok(group)
    })
}
