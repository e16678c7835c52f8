//! Which group channel the provider runs on: openraft over TCP, or (with
//! `TANDEM_GROUP=local`) an in-process hub for a single node without sockets.

use tandem_engine::local_group::LocalHub;
use tandem_engine::node::GroupFactory;
use tandem_group::{GroupStarter, RaftGroup};

pub fn factory() -> GroupFactory {
    if std::env::var("TANDEM_GROUP").is_ok_and(|v| v == "local") {
        return Box::new(|config| Ok(LocalHub::new().open(config)));
    }
    Box::new(|config| {
        let starter: Box<dyn GroupStarter> = Box::new(RaftGroup::open(config)?);
        Ok(starter)
    })
}
