//! Reads the position of the local data after a crash the way the
//! distribution's `galera_recovery` does before a start: the server binary
//! itself with `--wsrep-recover`, which runs InnoDB's crash recovery and
//! prints the wsrep position. Only while the position is unknown (the node
//! did not shut down cleanly and the server passed none), and before the
//! server has opened its storage engines (the SST methods that run before
//! them: rsync, mariabackup), so the two never open the same files at once.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use tandem_engine::saved_state::parse_recovered_position;
use tandem_engine::types::Gtid;

/// Set in the recovering child, in case a server ever loads the provider in
/// `--wsrep-recover` mode: it must not recover recursively.
const GUARD: &str = "TANDEM_RECOVERING";

/// Runs `<this server> <its arguments> --wsrep-recover` and returns the
/// position it printed.
pub fn recover_position(data_dir: &Path) -> Result<Gtid, String> {
    if std::env::var_os(GUARD).is_some() {
        return Err("already inside a recovery".into());
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the server binary: {e}"))?;
    let log = data_dir.join("tandem-recover.log");
    // The server appends to its log: an earlier recovery's line must not
    // be read as this one's.
    match std::fs::remove_file(&log) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("cannot clear {}: {e}", log.display()));
        }
        _ => {}
    }
    let started = Instant::now();
    let status = Command::new(&exe)
        .args(server_args())
        .arg("--wsrep-recover")
        .arg(format!("--log-error={}", log.display()))
        .arg(format!("--pid-file={}", data_dir.join("tandem-recover.pid").display()))
        .arg("--skip-networking")
        .arg(format!("--socket={}", data_dir.join("tandem-recover.sock").display()))
        .env(GUARD, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run {} --wsrep-recover: {e}", exe.display()))?;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    match parse_recovered_position(&text).filter(|_| status.success()) {
        Some(position) => {
            log::info!(
                "Recovered the position of the local data after a crash: {position} \
                 ({} --wsrep-recover, {:.1} s)",
                exe.display(),
                started.elapsed().as_secs_f64()
            );
            Ok(position)
        }
        None => Err(format!("{} --wsrep-recover ({status}) printed no position; see {}", exe.display(), log.display())),
    }
}

/// The server's own command line, minus what must not apply to a recovery.
fn server_args() -> Vec<String> {
    let own = |a: &str| {
        ["--wsrep-new-cluster", "--wsrep_new_cluster", "--wsrep-start-position", "--wsrep_start_position"]
            .iter()
            .any(|p| a.starts_with(p))
    };
    std::env::args().skip(1).filter(|a| !own(a)).collect()
}
