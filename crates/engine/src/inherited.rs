//! A group founded on a Galera node's data: what Galera's own cache
//! (`galera.cache`, beside Tandem's log) says of the seqnos just below the
//! founder's position.
//!
//! Each clean departure from a Galera cluster is a configuration change
//! with a seqno of its own, so the nodes of a cleanly stopped cluster end a
//! few seqnos apart (3, 2, 1 stopped in turn: 25, 26, 27). The most
//! advanced node founds the Tandem group at its position (27); its log
//! holds nothing before it. The others' data lacks only configuration
//! changes (26, 27), which carry no data, so the founder reads Galera's
//! cache and tells the group the last seqno that may have carried data
//! (25, `JoinInfo::inherited_last_write`). A member at that seqno or later
//! then counts as being at the founder's position
//! (`Footing::skip_inherited_changes`) and resumes without a state
//! transfer. Anything the cache cannot vouch for (a crash, another
//! history, a seqno it no longer holds) counts as data: the cost is a
//! state transfer, never a lost write.

use crate::types::{Gtid, Seqno, Uuid};
use std::path::Path;

/// The last seqno up to `start` that may have carried data, when Galera's
/// cache at `path` shows configuration changes above it; logged either way
/// when there is a cache to read.
pub(crate) fn inherited_last_write(path: &Path, start: Gtid) -> Option<Seqno> {
    if start.seqno <= 0 || start.uuid.is_nil() || !path.is_file() {
        return None;
    }
    let ring = match tandem_gcache::read_galera_ring(path) {
        Ok(ring) => ring,
        Err(why) => {
            log::warn!(
                "Galera's cache is not readable ({why}): members behind this node's position take a state transfer"
            );
            return None;
        }
    };
    if Uuid::parse(&ring.gid) != Some(start.uuid) {
        log::info!("Galera's cache {} belongs to history {}, not {}: not used", path.display(), ring.gid, start.uuid);
        return None;
    }
    if !ring.synced {
        log::warn!(
            "Galera's cache {} was not closed cleanly: its seqnos are not trusted, and members behind this \
             node's position ({start}) take a state transfer",
            path.display()
        );
        return None;
    }
    let last_write = ring.last_write_at_or_below(start.seqno);
    if last_write == start.seqno {
        log::info!("Galera's cache {}: seqno {} was not a configuration change", path.display(), start.seqno);
        return None;
    }
    log::info!(
        "Galera's cache {}: seqnos {}-{} were configuration changes; members at seqno {last_write} or later \
         rejoin without a state transfer",
        path.display(),
        last_write + 1,
        start.seqno
    );
    Some(last_write)
}
