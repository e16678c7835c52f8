//! Proves the cluster harness against the real Galera provider: three nodes,
//! a write on node 2 visible on nodes 1 and 3, a crash and rejoin, clean stop.
//! Heavy (about a minute, three SSTs), hence `#[ignore]`:
//! `cargo test -p tandem -- --ignored`.

use std::time::Duration;
use tandem::cluster::{Cluster, ClusterSpec, ProviderKind};

fn count(cluster: &Cluster, i: usize) -> String {
    let rows = cluster.node(i).sql("SELECT COUNT(*), COALESCE(SUM(v), 0) FROM t.kv").unwrap();
    rows[0].join(",")
}

#[test]
#[ignore = "starts three mariadbd servers with Galera (about a minute)"]
fn three_node_galera_cluster_replicates() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = ClusterSpec::new(tmp.path().join("c"), 3, ProviderKind::Galera);
    let mut cluster = Cluster::up(spec).unwrap();

    for i in 1..=3 {
        assert_eq!(cluster.node(i).status("wsrep_cluster_size").unwrap(), "3");
        assert_eq!(cluster.node(i).status("wsrep_provider_name").unwrap(), "Galera");
    }

    let writer = cluster.node(2);
    writer.sql("CREATE DATABASE t").unwrap();
    writer.sql("CREATE TABLE t.kv (k INT PRIMARY KEY, v INT NOT NULL)").unwrap();
    writer.sql("INSERT INTO t.kv VALUES (1, 10), (2, 20), (3, 30)").unwrap();
    // Galera applies asynchronously; causal reads make the readers wait for it.
    for i in [1, 3] {
        let rows = cluster.node(i).sql("SET SESSION wsrep_sync_wait = 1; SELECT SUM(v) FROM t.kv").unwrap();
        assert_eq!(rows, vec![vec!["60".to_string()]], "node {i}");
    }

    // Crash node 3, write while it is down, bring it back: it must catch up (IST).
    cluster.kill(3).unwrap();
    assert!(!cluster.is_running(3));
    cluster.node(1).sql("INSERT INTO t.kv VALUES (4, 40)").unwrap();
    cluster.start(3).unwrap();
    cluster.wait_synced(3, Duration::from_secs(120)).unwrap();
    cluster.node(3).sql("SET GLOBAL wsrep_sync_wait = 1").unwrap();
    assert_eq!(count(&cluster, 3), "4,100");
    assert_eq!(count(&cluster, 2), "4,100");

    let pids: Vec<u32> = cluster.nodes().iter().filter_map(|n| n.pid).collect();
    cluster.down(false).unwrap();
    for pid in pids {
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "pid {pid} survived");
    }
}
