//! When no member's log still holds the write-sets a returning node misses
//! (a small `gcache.size`, and more written while it was away), it falls back
//! to a full state transfer, says so in its error log, and ends identical.

use std::time::{Duration, Instant};

use tandem_cluster_tests::*;

const TABLE: &str = "sst.rows";
const VICTIM: usize = 3;
const CACHE_BYTES: i64 = 2 << 20;

#[test]
fn rejoin_falls_back_to_sst_when_the_group_log_was_purged() -> anyhow::Result<()> {
    let mut c = up_with(3, |s| s.provider_options.push(("gcache.size".into(), "2M".into())))?;
    create_rows_table(c.node(1), TABLE)?;
    insert_rows(c.node(1), TABLE, 1, 0, 50, 100)?;
    checksums(c.node(VICTIM), &[TABLE])?;
    let position = status_i64(c.node(VICTIM), "wsrep_last_committed")?;
    c.stop(VICTIM)?;
    put_no_sst_marker(c.node(VICTIM))?;

    // About 10 MB of write-sets (4 KB each), five times the cache.
    insert_rows_on(&c, &[1, 2], TABLE, 1_000_000, 1250, 4000)?;
    // Precondition: both survivors purged past what node 3 needs (commits are
    // released ~5 s after they are durable, purge runs about every second).
    let (n1, n2) = (c.node(1).clone(), c.node(2).clone());
    let purged =
        wait_for("both survivors to purge past the stopped node's position", Duration::from_secs(120), || {
            Ok(status_i64(&n1, "wsrep_local_cached_downto")? > position + 1
                && status_i64(&n2, "wsrep_local_cached_downto")? > position + 1)
        })?;
    for n in [&n1, &n2] {
        println!(
            "{}: wsrep_local_cached_downto {}, wsrep_gcache_pool_size {} (gcache.size {CACHE_BYTES})",
            n.name,
            status(n, "wsrep_local_cached_downto")?,
            status(n, "wsrep_gcache_pool_size")?
        );
    }

    let started = Instant::now();
    c.start(VICTIM)?;
    c.wait_synced(VICTIM, Duration::from_secs(300))?;
    println!(
        "SST fallback: node {VICTIM} at seqno {position}; purge reached it {:.1} s after the writes; \
         start to Synced {:.1} s",
        purged.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );

    assert_eq!(recovered_seqno(c.node(VICTIM))?, position, "node {VICTIM} restarted from its own data");
    let log = error_log(c.node(VICTIM));
    let fallback =
        format!("IST is not possible: local seqno {position} is older than the history the group still holds");
    assert!(log.contains(&fallback), "node {VICTIM}'s error log says why it needs SST ({fallback:?})");
    assert!(log.contains("falling back to a full state transfer (SST)"));
    // No member could serve it either (`catch_up`): the log says who holds what.
    assert!(log.contains("No member holds the group log after this member's last index"), "no member named");
    assert!(
        !has_no_sst_marker(c.node(VICTIM)),
        "node {VICTIM} got a full state transfer (its data directory was replaced)"
    );
    assert_eq!(ist_status(c.node(VICTIM))?, None, "no IST reported after an SST");
    assert_identical(&c, &[TABLE])?;
    let rows = sql(c.node(VICTIM), &format!("SELECT COUNT(*) FROM {TABLE}")).map_err(anyhow::Error::msg)?;
    assert_eq!(rows, "2550", "node {VICTIM} has every row");
    assert_eq!(status(c.node(VICTIM), "wsrep_cluster_size")?, "3");
    Ok(())
}
