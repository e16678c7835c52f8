//! A real cluster seen the way a DBA sees one from another machine: by
//! address, with a monitoring user whose password comes from a file (the
//! Docker secrets convention), never from the command line. `tandem cluster
//! status --remote` shows every node; `tandem node wait-synced` (the
//! systemd drop-in's ExecStartPost) returns only once a restarted node is
//! Synced again.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};
use std::time::Instant;

use tandem_cluster_tests::*;

fn tandem(args: &[&str], env: &[(&str, &str)]) -> Output {
    let bin = tandem::cluster::sst_script::tandem_binary().expect("the tandem binary is built beside the tests");
    let mut cmd = Command::new(bin);
    cmd.args(args).env_remove("TANDEM_PASSWORD").env_remove("TANDEM_PASSWORD_FILE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("running tandem")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn a_real_cluster_by_address_with_the_password_from_a_file() -> anyhow::Result<()> {
    let mut c = up(3)?;
    sql(c.node(1), "CREATE USER monitor@'%' IDENTIFIED BY 's3cret-pw'").map_err(anyhow::Error::msg)?;
    let dir = tempfile::tempdir()?;
    let secret = dir.path().join("monitor-password");
    std::fs::write(&secret, "s3cret-pw\n")?;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600))?;
    let wrong = dir.path().join("wrong-password");
    std::fs::write(&wrong, "nope\n")?;
    std::fs::set_permissions(&wrong, std::fs::Permissions::from_mode(0o644))?;
    let secret_s = secret.to_str().unwrap();
    let nodes: Vec<String> = (1..=3).map(|i| format!("127.0.0.1:{}", c.node(i).sql_port)).collect();
    let remote = nodes.join(",");

    let ok =
        tandem(&["cluster", "status", "--remote", &remote, "--user", "monitor"], &[("TANDEM_PASSWORD_FILE", secret_s)]);
    let shown = text(&ok);
    println!("{shown}");
    assert!(ok.status.success(), "{shown}");
    assert!(!shown.contains("readable by every user"), "{shown}");
    for node in &nodes {
        let line = shown.lines().find(|l| l.starts_with(node.as_str())).unwrap_or_else(|| panic!("{node}:\n{shown}"));
        for want in ["yes", "Primary", "Synced", "Tandem"] {
            assert!(line.split_whitespace().any(|w| w == want), "{node}: no {want}: {line}");
        }
        assert!(line.split_whitespace().nth(2) == Some("3"), "{node}: cluster size: {line}");
    }

    let denied = tandem(
        &["cluster", "status", "--remote", &remote, "--user", "monitor", "--password-file", wrong.to_str().unwrap()],
        &[],
    );
    assert!(!denied.status.success(), "a wrong password passed:\n{}", text(&denied));
    assert!(text(&denied).contains("Access denied for user 'monitor'"), "{}", text(&denied));
    assert!(text(&denied).contains("3 of 3 nodes did not answer"), "{}", text(&denied));
    assert!(text(&denied).contains("is readable by every user"), "a 0644 secret file went unremarked");
    let both = tandem(
        &["cluster", "status", "--remote", &remote, "--user", "monitor"],
        &[("TANDEM_PASSWORD", "s3cret-pw"), ("TANDEM_PASSWORD_FILE", secret_s)],
    );
    assert!(
        !both.status.success() && text(&both).contains("both TANDEM_PASSWORD and TANDEM_PASSWORD_FILE"),
        "{}",
        text(&both)
    );

    // A restart, as systemd runs it with the drop-in: start, then wait.
    create_rows_table(c.node(1), "test.missed")?;
    c.stop(3)?;
    insert_rows_on(&c, &[1, 2], "test.missed", 0, 200, 100)?;
    let started = Instant::now();
    c.start(3)?;
    let waited = tandem(
        &["node", "wait-synced", "--node", &nodes[2], "--user", "monitor", "--timeout", "240"],
        &[("TANDEM_PASSWORD", "s3cret-pw")],
    );
    println!("{}", text(&waited));
    assert!(waited.status.success(), "{}", text(&waited));
    assert!(text(&waited).contains("is Synced (waited"), "{}", text(&waited));
    assert_eq!(status(c.node(3), "wsrep_local_state_comment")?, "Synced", "wait-synced returned early");
    println!("node 3 restarted and Synced in {:.1} s", started.elapsed().as_secs_f64());
    assert_identical(&c, &["test.missed"])?;

    let gone = tandem(&["node", "wait-synced", "--node", "127.0.0.1:1", "--timeout", "1"], &[]);
    assert!(!gone.status.success() && text(&gone).contains("is not Synced after"), "{}", text(&gone));
    Ok(())
}
