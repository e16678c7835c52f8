//! The systemd units we ship, checked by systemd's own parser
//! (`systemd-analyze verify`, which needs no running systemd): the
//! arbitrator's unit, and the drop-in for the distribution's
//! `mariadb.service` on top of the installed unit. A key systemd does not
//! know, a bad value or a missing program fails the check. The paths to
//! the `tandem` binary are pointed at the one cargo built.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn with_our_binary(text: &str) -> String {
    text.replace("/usr/local/bin/tandem", env!("CARGO_BIN_EXE_tandem"))
}

/// Runs the check and returns what it said about our files (it also
/// complains about unrelated units installed on the machine).
fn verify(unit: &Path, ours: &[&str]) -> (bool, Vec<String>) {
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(unit)
        .env("SYSTEMD_LOG_COLOR", "0")
        .output()
        .expect("systemd-analyze (package systemd; make deps) must be installed");
    let said = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let about_ours = said.lines().filter(|l| ours.iter().any(|o| l.contains(o))).map(String::from).collect();
    (out.status.success(), about_ours)
}

#[test]
fn the_arbitrator_unit_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(repo().join("packaging/systemd/tandem-arbitrator.service")).unwrap();
    let unit = dir.path().join("tandem-arbitrator.service");
    std::fs::write(&unit, with_our_binary(&text)).unwrap();
    let (ok, said) = verify(&unit, &["tandem-arbitrator"]);
    assert!(ok && said.is_empty(), "systemd-analyze verify: {said:#?}");
}

#[test]
fn the_mariadb_drop_in_verifies_on_the_installed_unit() {
    let installed = Path::new("/lib/systemd/system/mariadb.service");
    let stock = std::fs::read_to_string(installed).expect("mariadb-server's unit (make deps installs it)");
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("mariadb.service");
    std::fs::write(&unit, stock).unwrap();
    std::fs::create_dir(dir.path().join("mariadb.service.d")).unwrap();
    let drop_in = std::fs::read_to_string(repo().join("packaging/systemd/mariadb.service.d/tandem.conf")).unwrap();
    std::fs::write(dir.path().join("mariadb.service.d/tandem.conf"), with_our_binary(&drop_in)).unwrap();
    let (ok, said) = verify(&unit, &["tandem.conf", "mariadb.service"]);
    assert!(ok && said.is_empty(), "systemd-analyze verify: {said:#?}");

    // The check reads the drop-in: a key systemd does not know is named.
    std::fs::write(dir.path().join("mariadb.service.d/tandem.conf"), "[Service]\nExecStartPostt=/bin/true\n").unwrap();
    let (_, said) = verify(&unit, &["tandem.conf"]);
    assert!(said.iter().any(|l| l.contains("ExecStartPostt")), "the drop-in was not read: {said:#?}");
}

/// The drop-in's command line is one `tandem` accepts: run against a
/// socket where no server is, it waits, gives up and says why.
#[test]
fn the_drop_ins_command_runs() {
    let drop_in = std::fs::read_to_string(repo().join("packaging/systemd/mariadb.service.d/tandem.conf")).unwrap();
    let line = drop_in.lines().find_map(|l| l.strip_prefix("ExecStartPost=+")).expect("an ExecStartPost line");
    let mut words = line.split_whitespace();
    assert_eq!(words.next(), Some("/usr/local/bin/tandem"));
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("mysqld.sock");
    let args: Vec<String> = words
        .map(|w| if w == "/run/mysqld/mysqld.sock" { socket.display().to_string() } else { w.to_string() })
        .collect();
    let out = Command::new(env!("CARGO_BIN_EXE_tandem")).args(&args).args(["--timeout", "1"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("is not Synced after") && said.contains("no answer"), "{said}");
}
