//! `grastate.dat`: the position of the local data, in Galera's format, so
//! existing tooling and a whole-cluster restart keep working.
//!
//! While the node runs, seqno is -1 (the data moves on); a clean shutdown
//! writes the last committed seqno. `safe_to_bootstrap` is 1 only on the last
//! member to leave a primary component.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::types::{Gtid, Seqno, Uuid};

pub const FILE: &str = "grastate.dat";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedState {
    pub position: Gtid,
    pub safe_to_bootstrap: bool,
}

pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

impl SavedState {
    pub fn render(&self) -> String {
        format!(
            "# GALERA saved state\nversion: 2.1\nuuid:    {}\nseqno:   {}\nsafe_to_bootstrap: {}\n",
            self.position.uuid, self.position.seqno, self.safe_to_bootstrap as u8
        )
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
        Ok(SavedState { position: Gtid { uuid, seqno }, safe_to_bootstrap: safe })
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

    /// Atomic replace: write a temporary file, fsync, rename.
    pub fn store(&self, data_dir: &Path) -> std::io::Result<()> {
        let p = path(data_dir);
        let tmp = p.with_extension("dat.tmp");
        let mut f = fs::File::create(&tmp)?;
        f.write_all(self.render().as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_galera_layout() {
        let s = SavedState { position: Gtid { uuid: Uuid([3; 16]), seqno: 42 }, safe_to_bootstrap: true };
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
