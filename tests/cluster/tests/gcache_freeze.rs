//! `gcache.freeze_purge_at_seqno` (PXC semantics): while frozen, a node's
//! log grows past `gcache.size` and keeps everything from the frozen seqno
//! on; unfrozen (-1), it purges back under the size.

use std::thread;
use std::time::{Duration, Instant};

use tandem_cluster_tests::*;

const TABLE: &str = "freeze.rows";
const CACHE_BYTES: i64 = 2 << 20;

fn set_provider_option(node: &tandem::cluster::Node, option: &str) -> anyhow::Result<()> {
    sql(node, &format!("SET GLOBAL wsrep_provider_options='{option}'")).map(drop).map_err(anyhow::Error::msg)
}

/// The value `wsrep_provider_options` shows for the freeze.
fn shown_freeze(node: &tandem::cluster::Node) -> anyhow::Result<String> {
    let options = sql(node, "SELECT @@wsrep_provider_options").map_err(anyhow::Error::msg)?;
    let shown = options.split(';').find_map(|o| o.trim().strip_prefix("gcache.freeze_purge_at_seqno = "));
    Ok(shown.ok_or_else(|| anyhow::anyhow!("the freeze is not shown in {options}"))?.trim().to_string())
}

#[test]
fn frozen_cache_keeps_history_past_its_size_and_purges_once_unfrozen() -> anyhow::Result<()> {
    let c = up_with(3, |s| s.provider_options.push(("gcache.size".into(), "2M".into())))?;
    let (n1, n2) = (c.node(1).clone(), c.node(2).clone());
    create_rows_table(&n1, TABLE)?;
    insert_rows(&n1, TABLE, 1, 0, 50, 100)?;

    // A seqno the log does not hold is refused, naming it, and changes nothing.
    let last = status_i64(&n1, "wsrep_last_committed")?;
    let beyond = last + 1000;
    let refused = set_provider_option(&n1, &format!("gcache.freeze_purge_at_seqno={beyond}"));
    assert!(refused.is_err(), "freezing at seqno {beyond}, past the last one ({last}), was taken");
    assert!(error_log(&n1).contains(&format!("seqno {beyond} is not in this node's gcache")), "no error names it");
    assert_eq!(shown_freeze(&n1)?, "-1", "a refused freeze changes nothing");

    // `now`: the oldest seqno the log holds, as in PXC.
    let downto_before = status_i64(&n1, "wsrep_local_cached_downto")?;
    set_provider_option(&n1, "gcache.freeze_purge_at_seqno=now")?;
    let frozen: i64 = shown_freeze(&n1)?.parse()?;
    assert_eq!(frozen, downto_before, "now froze at {frozen}, not at the oldest seqno held ({downto_before})");
    println!("frozen at seqno {frozen}, the oldest node 1 holds (last committed {last})");

    // About 10 MB of write-sets (4 KB each), five times the cache, from the
    // other two nodes.
    insert_rows_on(&c, &[2, 3], TABLE, 1_000_000, 1250, 4000)?;
    let last = status_i64(&n1, "wsrep_last_committed")?;

    // Control: node 2, not frozen, purges past the frozen seqno, so node 1
    // would have too by now.
    let control = wait_for("node 2 (not frozen) to purge past the frozen seqno", Duration::from_secs(120), || {
        Ok(status_i64(&n2, "wsrep_local_cached_downto")? > frozen)
    })?;
    // Watch node 1 for a few purge rounds more.
    let watch = Instant::now();
    while watch.elapsed() < Duration::from_secs(5) {
        let downto = status_i64(&n1, "wsrep_local_cached_downto")?;
        assert!(downto <= frozen, "node 1 purged past its frozen seqno {frozen}: it caches from {downto}");
        thread::sleep(Duration::from_millis(500));
    }
    let frozen_pool = status_i64(&n1, "wsrep_gcache_pool_size")?;
    let frozen_downto = status_i64(&n1, "wsrep_local_cached_downto")?;
    println!(
        "frozen: node 1 pool {frozen_pool} bytes, caches {frozen_downto}..{last}; node 2 purged past {frozen} \
         {:.1} s after the writes: pool {} bytes, caches from {} (gcache.size {CACHE_BYTES})",
        control.as_secs_f64(),
        status(&n2, "wsrep_gcache_pool_size")?,
        status(&n2, "wsrep_local_cached_downto")?
    );
    assert!(frozen_pool > 2 * CACHE_BYTES, "the frozen log grew well past gcache.size: {frozen_pool} bytes");
    assert!(frozen_downto <= frozen, "node 1 still caches the frozen seqno {frozen}: from {frozen_downto}");
    assert!(status_i64(&n1, "wsrep_gcache_reach_seqnos")? >= last - frozen, "reach covers the frozen history");

    set_provider_option(&n1, "gcache.freeze_purge_at_seqno=-1")?;
    let shrank = wait_for("node 1's log to shrink under gcache.size once unfrozen", Duration::from_secs(120), || {
        Ok(status_i64(&n1, "wsrep_gcache_pool_size")? <= CACHE_BYTES)
    })?;
    let pool = status_i64(&n1, "wsrep_gcache_pool_size")?;
    let downto = status_i64(&n1, "wsrep_local_cached_downto")?;
    println!("unfrozen: node 1 pool {pool} bytes after {:.1} s, caches from {downto}", shrank.as_secs_f64());
    assert!(downto > frozen, "node 1 purged past the formerly frozen seqno {frozen}: caches from {downto}");
    assert_identical(&c, &[TABLE])?;
    Ok(())
}
