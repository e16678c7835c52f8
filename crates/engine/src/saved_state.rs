//! `grastate.dat`: the position of the local data, in Galera's format, so
//! existing tooling and a whole-cluster restart keep working.
//!
//! While the node runs, seqno is -1 (the data moves on); a clean shutdown
//! writes the last committed seqno. `safe_to_bootstrap` is 1 only on the last
//! member to leave a primary component. A node that left the cluster as
//! inconsistent (consistency voting) says so in an extra line, which
//! Galera's reader skips: its data must be replaced by a state transfer,
//! whatever position the server recovers from it.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::types::{Gtid, Seqno, Uuid};

pub const FILE: &str = "grastate.dat";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedState {
    pub position: Gtid,
    pub safe_to_bootstrap: bool,
    /// The seqno on which this node's data was voted inconsistent.
    pub inconsistent_at: Option<Seqno>,
}

pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

impl SavedState {
    /// A running node's state: the data moves on.
    pub fn running(uuid: Uuid, safe_to_bootstrap: bool) -> SavedState {
        SavedState { position: Gtid { uuid, seqno: -1 }, safe_to_bootstrap, inconsistent_at: None }
    }

    pub fn render(&self) -> String {
        let mut text = format!(
            "# GALERA saved state\nversion: 2.1\nuuid:    {}\nseqno:   {}\nsafe_to_bootstrap: {}\n",
            self.position.uuid, self.position.seqno, self.safe_to_bootstrap as u8
        );
        if let Some(seqno) = self.inconsistent_at {
            text.push_str(&format!("inconsistent_at: {seqno}\n"));
        }
        text
    }

    pub fn parse(text: &str) -> Result<SavedState, String> {
        let field = |name: &str| {
            text.lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim() == name)
                .map(|(_, v)| v.trim().to_string())
        };
        let uuid = field("uuid").ok_or("no uuid line")?;
        let uuid = Uuid::parse(&uuid).ok_or_else(|| format!("bad uuid '{uuid}'"))?;
        let seqno = field("seqno").ok_or("no seqno line")?;
        let seqno: Seqno = seqno.parse().map_err(|_| format!("bad seqno '{seqno}'"))?;
        let safe = field("safe_to_bootstrap").map(|v| v == "1").unwrap_or(false);
        let inconsistent_at = match field("inconsistent_at") {
            Some(v) => Some(v.parse().map_err(|_| format!("bad inconsistent_at '{v}'"))?),
            None => None,
        };
        Ok(SavedState { position: Gtid { uuid, seqno }, safe_to_bootstrap: safe, inconsistent_at })
    }

    /// Reads the file; a missing file is `None`, a damaged one is logged and
    /// left in place for the operator (nothing is overwritten until a clean
    /// position is known).
    pub fn load(data_dir: &Path) -> Option<SavedState> {
        let p = path(data_dir);
        let text = fs::read_to_string(&p).ok()?;
        match SavedState::parse(&text) {
            Ok(s) => Some(s),
            Err(why) => {
                log::error!("Corrupt saved state {}: {why}; ignoring it (file left untouched)", p.display());
                None
            }
        }
    }

    /// Atomic replace: write a temporary file, fsync, rename. Writers are
    /// serialized: the view applier and the sync path may both record the
    /// state at once, and two writers sharing one temporary file make the
    /// second rename fail (its file was already renamed away).
    pub fn store(&self, data_dir: &Path) -> std::io::Result<()> {
        static WRITER: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one_at_a_time = WRITER.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let p = path(data_dir);
        let tmp = p.with_extension("dat.tmp");
        let mut f = fs::File::create(&tmp)?;
        f.write_all(self.render().as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &p)
    }
}

/// What is known about the position of the local data when a node starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalData {
    /// Given by the server (`wsrep_start_position`, from `--wsrep-recover`),
    /// or saved at a clean shutdown.
    Known(Gtid),
    /// No saved state at all: a new node, which gets a state transfer.
    Fresh,
    /// The node was running and did not shut down cleanly (grastate.dat
    /// says seqno -1), and nobody told it where its data is: joining on a
    /// guess could skip or repeat transactions.
    Unknown { history: Uuid },
    /// The node left the cluster as inconsistent (consistency voting): the
    /// server's position describes data the group voted wrong.
    Inconsistent { history: Uuid, at: Seqno },
}

/// Where the local data is, from the server's start position and
/// grastate.dat.
pub fn local_data(start: Gtid, saved: Option<SavedState>) -> LocalData {
    if let Some(SavedState { position, inconsistent_at: Some(at), .. }) = saved {
        return LocalData::Inconsistent { history: position.uuid, at };
    }
    if start.seqno >= 0 && !start.uuid.is_nil() {
        return LocalData::Known(start);
    }
    match saved {
        Some(s) if s.position.seqno >= 0 && !s.position.uuid.is_nil() => LocalData::Known(s.position),
        Some(s) if !s.position.uuid.is_nil() => LocalData::Unknown { history: s.position.uuid },
        _ => LocalData::Fresh,
    }
}

/// The position `mariadbd --wsrep-recover` printed in its log (the last
/// "WSREP: Recovered position:" line), unless it is the "nothing known" one.
pub fn parse_recovered_position(log: &str) -> Option<Gtid> {
    const MARK: &str = "WSREP: Recovered position: ";
    let line = log.lines().rev().find(|l| l.contains(MARK))?;
    let gtid = Gtid::parse(line.split(MARK).nth(1)?)?;
    (gtid.seqno >= 0 && !gtid.uuid.is_nil()).then_some(gtid)
}

/// Galera's words, which operators and the MTR suites know.
pub const NOT_SAFE_TO_BOOTSTRAP: &str = "It may not be safe to bootstrap the cluster from this node. \
It was not the last one to leave the cluster and may not contain all the updates. \
To force cluster bootstrap with this node, edit the grastate.dat file manually and set safe_to_bootstrap to 1 .";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_position_is_the_servers_then_the_saved_one_else_unknown_after_a_crash() {
        let g = Gtid { uuid: Uuid([5; 16]), seqno: 9 };
        let crashed = SavedState::running(Uuid([5; 16]), false);
        let clean = SavedState { position: g, safe_to_bootstrap: true, inconsistent_at: None };
        assert_eq!(local_data(g, Some(crashed)), LocalData::Known(g), "--wsrep-recover wins");
        assert_eq!(local_data(Gtid::UNDEFINED, Some(clean)), LocalData::Known(g));
        assert_eq!(local_data(Gtid::UNDEFINED, Some(crashed)), LocalData::Unknown { history: Uuid([5; 16]) });
        assert_eq!(local_data(Gtid::UNDEFINED, None), LocalData::Fresh);
        let never_joined = SavedState { position: Gtid::UNDEFINED, safe_to_bootstrap: false, inconsistent_at: None };
        assert_eq!(local_data(Gtid::UNDEFINED, Some(never_joined)), LocalData::Fresh);
    }

    #[test]
    fn an_inconsistent_node_does_not_trust_the_servers_position() {
        let voted_out = SavedState { inconsistent_at: Some(12), ..SavedState::running(Uuid([5; 16]), false) };
        let recovered = Gtid { uuid: Uuid([5; 16]), seqno: 12 };
        assert_eq!(local_data(recovered, Some(voted_out)), LocalData::Inconsistent { history: Uuid([5; 16]), at: 12 });
        let text = voted_out.render();
        assert!(text.ends_with("safe_to_bootstrap: 0\ninconsistent_at: 12\n"), "{text}");
        assert_eq!(SavedState::parse(&text), Ok(voted_out));
        assert!(SavedState::parse(&text.replace("12\n", "x\n")).is_err());
    }

    #[test]
    fn concurrent_writers_all_succeed_and_leave_a_whole_file() {
        let dir = std::env::temp_dir().join(format!("tandem-grastate-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let writers: Vec<_> = (0..8)
            .map(|t| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    for seqno in 0..40 {
                        let s = SavedState {
                            position: Gtid { uuid: Uuid([t as u8 + 1; 16]), seqno },
                            safe_to_bootstrap: t % 2 == 0,
                            inconsistent_at: None,
                        };
                        s.store(&dir).expect("every write succeeds");
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let last = SavedState::load(&dir).expect("a whole, parsable file");
        assert_eq!(last.position.seqno, 39, "the file is one writer's last state, not a mix");
        assert!(!path(&dir).with_extension("dat.tmp").exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn recovered_positions_are_read_from_the_last_line() {
        let log = "2026-11-23  8:37:22 0 [Note] WSREP: Recovered position: 5febba8e-070e-49bc-a01f-c8c38ec3d1af:2176\n";
        assert_eq!(parse_recovered_position(log).map(|g| g.seqno), Some(2176));
        let unknown = "[Note] WSREP: Recovered position: 00000000-0000-0000-0000-000000000000:-1\n";
        assert_eq!(parse_recovered_position(unknown), None);
        assert_eq!(parse_recovered_position("nothing here"), None);
    }

    #[test]
    fn round_trip_and_galera_layout() {
        let s = SavedState {
            position: Gtid { uuid: Uuid([3; 16]), seqno: 42 },
            safe_to_bootstrap: true,
            inconsistent_at: None,
        };
        let text = s.render();
        assert!(text.starts_with("# GALERA saved state\nversion: 2.1\nuuid:    03030303-"));
        assert!(text.contains("\nseqno:   42\nsafe_to_bootstrap: 1\n"));
        assert_eq!(SavedState::parse(&text), Ok(s));
    }

    #[test]
    fn damaged_files_are_reported_and_kept() {
        let dir = std::env::temp_dir().join(format!("tandem-gs-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(path(&dir), "# GALERA saved state\nuuid: garbage\n").unwrap();
        assert_eq!(SavedState::load(&dir), None);
        assert!(fs::read_to_string(path(&dir)).unwrap().contains("garbage"), "not overwritten");
        assert!(SavedState::parse("seqno: 5").is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}
