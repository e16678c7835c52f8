//! Bad input gets a clear error and loses nothing: malformed or unknown
//! provider options, garbage on the group port, a peer of another cluster.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use tandem_cluster_tests::*;

#[test]
fn bad_options_garbage_and_foreign_peers_are_refused_and_the_cluster_works_on() -> anyhow::Result<()> {
    let c = up(2)?;
    let n1 = c.node(1).clone();

    // Unknown key and malformed syntax: Galera's error, a clear log line.
    let err = sql(&n1, "SET GLOBAL wsrep_provider_options='no.such.key=1'").unwrap_err();
    assert!(err.contains("Incorrect arguments to SET"), "{err}");
    let err = sql(&n1, "SET GLOBAL wsrep_provider_options='gcache.size'").unwrap_err();
    assert!(err.contains("Incorrect arguments to SET"), "{err}");
    let err = sql(&n1, "SET GLOBAL wsrep_provider_options='evs.suspect_timeout=soon'").unwrap_err();
    assert!(err.contains("Incorrect arguments to SET"), "{err}");
    let log = error_log(&n1);
    assert!(log.contains("Unknown parameter 'no.such.key'"), "unknown key is named in the log");
    assert!(log.contains("Syntax error in provider options"), "syntax error is explained in the log");
    assert!(log.contains("Bad value 'soon' for parameter 'evs.suspect_timeout'"));
    // Nothing changed.
    let opts = sql(&n1, "SELECT @@wsrep_provider_options").map_err(anyhow::Error::msg)?;
    assert!(opts.contains("evs.suspect_timeout = PT3S"), "{opts}");

    // Random bytes on the group port.
    for _ in 0..3 {
        let mut s = TcpStream::connect(("127.0.0.1", n1.base_port))?;
        let junk: Vec<u8> = (0..4096).map(|_| rand::random::<u8>()).collect();
        let _ = s.write_all(&junk);
    }

    // A truncated handshake.
    let mut foreign = std::net::TcpStream::connect(("127.0.0.1", n1.base_port))?;
    let _ = foreign.write_all(b"TNDM");
    drop(foreign);

    // Each is named for what it was (the random bytes may, rarely, start
    // like our preamble: then they are a bad handshake instead).
    wait_for("the garbage and the truncated handshake reported", Duration::from_secs(30), || {
        let log = error_log(&n1);
        Ok(log.contains("is not a Tandem peer (first bytes") && log.contains("closed during the handshake"))
    })?;

    // The cluster still works.
    sql(&n1, "CREATE DATABASE still; CREATE TABLE still.t (id INT PRIMARY KEY); INSERT INTO still.t VALUES (1)")
        .map_err(anyhow::Error::msg)?;
    let v =
        sql(c.node(2), "SET SESSION wsrep_sync_wait=15; SELECT COUNT(*) FROM still.t").map_err(anyhow::Error::msg)?;
    assert_eq!(v, "1");
    assert_eq!(status(c.node(2), "wsrep_cluster_size")?, "2");
    Ok(())
}

/// Asking for TLS without what it needs is refused, at startup and at
/// `SET`, never accepted and ignored (plaintext while TLS was asked for).
#[test]
fn asking_for_tls_without_its_files_is_refused_at_startup_and_at_set() -> anyhow::Result<()> {
    let mut c = up(2)?;
    let n1 = c.node(1).clone();
    // A running plaintext node cannot switch to TLS by SET: refused, not ignored.
    let err = sql(&n1, "SET GLOBAL wsrep_provider_options='socket.ssl=YES'").unwrap_err();
    assert!(err.contains("Incorrect arguments to SET"), "{err}");
    let log = error_log(&n1);
    assert!(log.contains("for parameter 'socket.ssl': it is read only at startup"), "{}", tail(&log));
    let opts = sql(&n1, "SELECT @@wsrep_provider_options").map_err(anyhow::Error::msg)?;
    assert!(opts.contains("socket.ssl = NO"), "nothing changed: {opts}");

    // At startup, asking for TLS without a certificate: the node stops, and
    // says what is missing.
    c.stop(2)?;
    let from = error_log(c.node(2)).len();
    let asks = vec![("socket.ssl".to_string(), "YES".to_string())];
    c.start_with(2, &tandem::cluster::Start { provider_options: asks, ..Default::default() })?;
    wait_for("node 2 to refuse to start", Duration::from_secs(120), || Ok(!c.is_running(2)))?;
    let log = error_log(c.node(2))[from..].to_string();
    assert!(log.contains("needs a certificate and its key"), "startup names the reason:\n{}", tail(&log));
    assert!(log.contains("socket.ssl_cert and socket.ssl_key not set"), "and the settings:\n{}", tail(&log));
    assert!(!log.contains("Synchronized with group"), "it never joined:\n{}", tail(&log));
    assert_eq!(status(&n1, "wsrep_cluster_size")?, "1");
    sql(&n1, "CREATE DATABASE still_fine").map_err(anyhow::Error::msg)?;
    Ok(())
}

#[test]
fn a_node_of_another_cluster_is_refused_with_a_clear_error() -> anyhow::Result<()> {
    let c = up(1)?;
    let n1 = c.node(1).clone();
    // The foreign joiner: same cluster address as a real peer, another name.
    let dir = tempfile::tempdir_in("/tmp")?;
    let datadir = dir.path().join("data");
    std::fs::create_dir_all(&datadir)?;
    let log_path = dir.path().join("error.log");
    let mut child = std::process::Command::new("mariadbd")
        .arg("--no-defaults")
        .arg("--user=root")
        .arg(format!("--datadir={}", datadir.display()))
        .arg(format!("--socket={}", dir.path().join("sock").display()))
        .arg("--port=0")
        .arg("--skip-networking")
        .arg(format!("--log-error={}", log_path.display()))
        .arg("--wsrep-on=ON")
        .arg(format!("--wsrep-provider={}", provider_path().display()))
        .arg("--wsrep-cluster-name=another_cluster")
        .arg(format!("--wsrep-cluster-address=gcomm://127.0.0.1:{}", n1.base_port))
        .arg("--wsrep-node-address=127.0.0.1")
        .arg(format!("--wsrep-provider-options=base_port={};pc.wait_prim_timeout=PT5S", n1.base_port + 100))
        .arg("--wsrep-sst-method=mariabackup")
        .arg("--binlog-format=ROW")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    // Both sides say what differed: ours names the intruder's cluster, the
    // intruder logs that it was refused and why (its own log naming its
    // own cluster would prove nothing).
    let logged = wait_for("the refusal logged on both sides", Duration::from_secs(60), || {
        let theirs = std::fs::read_to_string(&log_path).unwrap_or_default();
        let ours = error_log(&n1);
        Ok(ours.contains("it belongs to cluster 'another_cluster'")
            && theirs.contains("refused our connection: cluster name mismatch"))
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(e) = logged {
        let theirs = std::fs::read_to_string(&log_path).unwrap_or_default();
        panic!("{e:#}\nours:\n{}\ntheirs:\n{}", tail(&error_log(&n1)), tail(&theirs));
    }
    assert_eq!(status(&n1, "wsrep_cluster_size")?, "1", "the intruder did not join");
    sql(&n1, "CREATE DATABASE fine").map_err(anyhow::Error::msg)?;
    Ok(())
}

/// `wsrep_allowlist`: the server's list is asked for every connection to the
/// group port. The cluster forms (its nodes are listed); a peer from an
/// address not listed is refused, told why, and the cluster works on.
#[test]
fn an_address_outside_wsrep_allowlist_is_refused() -> anyhow::Result<()> {
    let c = up_with(2, |spec| spec.mysqld_options.push(("wsrep_allowlist".into(), "127.0.0.1".into())))?;
    let n1 = c.node(1).clone();
    let rows = sql(&n1, "SELECT ip FROM mysql.wsrep_allowlist").map_err(anyhow::Error::msg)?;
    assert_eq!(rows, "127.0.0.1", "the server stored the list");

    // Loopback answers from any 127/8 address: come from one not listed.
    let reply = hello_from("127.0.0.2", n1.base_port)?;
    assert!(reply.contains("not in wsrep_allowlist"), "told why: {reply:?}");
    wait_for("the refusal in node 1's log", Duration::from_secs(20), || {
        Ok(error_log(&n1).contains("Connection not allowed, IP 127.0.0.2 not found in allowlist"))
    })?;

    sql(&n1, "CREATE DATABASE listed; CREATE TABLE listed.t (id INT PRIMARY KEY); INSERT INTO listed.t VALUES (1)")
        .map_err(anyhow::Error::msg)?;
    let v =
        sql(c.node(2), "SET SESSION wsrep_sync_wait=15; SELECT COUNT(*) FROM listed.t").map_err(anyhow::Error::msg)?;
    assert_eq!(v, "1");
    Ok(())
}

/// Sends a Tandem handshake from source address `from`; returns the answer.
fn hello_from(from: &str, port: u16) -> anyhow::Result<String> {
    use tandem_group::wire::{self, Hello, PROTOCOL_VERSION};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(format!("{from}:0").parse()?)?;
        let mut s = socket.connect(format!("127.0.0.1:{port}").parse()?).await?;
        let hello = Hello { cluster: "tandem".into(), member: 99, info: Default::default(), group: None };
        s.write_all(b"TNDM").await?;
        s.write_all(&PROTOCOL_VERSION.to_be_bytes()).await?;
        let frame = wire::encode_frame(&hello).map_err(|e| anyhow::anyhow!("{e}"))?;
        s.write_all(&frame).await?;
        let mut reply = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut reply)).await;
        Ok(String::from_utf8_lossy(&reply).to_string())
    })
}
