//! How a restarted node caught up, read from its error log: IST (only the
//! write-sets it missed) or SST (a full copy of the data).
//!
//! The excerpt is what the node logged from its start command until it was
//! Synced (the error log is appended to across restarts). SST evidence wins
//! over IST evidence: a node can do both (an SST, then an IST of what was
//! ordered meanwhile), and that is an SST.
//!
//! The lines, as both providers log them on this machine (MariaDB 10.11.19,
//! galera-4 26.4.23, `wsrep_sst_method=mariabackup`; excerpts in `testdata/`):
//!
//! * The joiner side of MariaDB's `wsrep_sst_mariabackup` script logs
//!   `WSREP_SST: [INFO] Proceeding with SST` when the donor streams a full
//!   backup, and `WSREP_SST: [INFO] 'xtrabackup_ist' received from donor:
//!   Running IST` when the donor ran with `--bypass` (Galera's IST, where
//!   the script only hands over the position). MariaDB logs `WSREP: SST
//!   received` once the script is done in both cases: that line decides nothing.
//! * Galera (joiner): `WSREP: Receiving IST: <n> writesets, seqnos <a>-<b>`
//!   and `WSREP: IST received: <uuid>:<seqno>`; also after an SST, for what
//!   was ordered while it ran.
//! * Tandem (joiner): `WSREP: Resuming at local seqno <x>: replaying what
//!   follows from the ordered history (IST)`. Like Galera it runs the SST
//!   script for an IST too, in bypass mode (the IST handshake: `IST handshake
//!   from <donor> requested`, then the script's `Running IST`), so a run of
//!   the joiner script decides nothing. A full transfer: `State transfer
//!   from <donor> requested`, and before it, when the node had data, `IST is
//!   not possible: ...; falling back to a full state transfer (SST)` or
//!   `Local state ... belongs to another history than the group's (...):
//!   full state transfer (SST)`.

use serde::{Deserialize, Serialize};
use tandem::cluster::ProviderKind;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transfer {
    Ist,
    Sst,
    /// No line of either kind: shown as such, never guessed.
    #[default]
    Unknown,
}

impl Transfer {
    pub fn label(self) -> &'static str {
        match self {
            Transfer::Ist => "IST",
            Transfer::Sst => "SST",
            Transfer::Unknown => "?",
        }
    }
}

/// The decision and the log line it rests on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub transfer: Transfer,
    pub evidence: Option<String>,
}

/// A full state transfer, with either provider.
const SST_ALWAYS: &[&str] = &["WSREP_SST: [INFO] Proceeding with SST"];
/// Tandem only: what it logs when it asks for a full transfer.
const SST_TANDEM: &[&str] =
    &["falling back to a full state transfer", "full state transfer (SST)", "WSREP: State transfer from "];
const IST_TANDEM: &[&str] = &["WSREP: Resuming at local seqno"];
const IST_GALERA: &[&str] = &["received from donor: Running IST", "WSREP: Receiving IST:", "WSREP: IST received:"];

pub fn decide(kind: ProviderKind, excerpt: &str) -> Decision {
    let (sst_own, ist): (&[&str], &[&str]) = match kind {
        ProviderKind::Tandem => (SST_TANDEM, IST_TANDEM),
        ProviderKind::Galera => (&[], IST_GALERA),
        ProviderKind::Standalone | ProviderKind::Null => (&[], &[]),
    };
    let first = |marks: &[&str]| {
        excerpt.lines().find(|line| marks.iter().any(|m| line.contains(m))).map(|line| line.trim().to_string())
    };
    if let Some(line) = first(SST_ALWAYS).or_else(|| first(sst_own)) {
        return Decision { transfer: Transfer::Sst, evidence: Some(line) };
    }
    if let Some(line) = first(ist) {
        return Decision { transfer: Transfer::Ist, evidence: Some(line) };
    }
    Decision { transfer: Transfer::Unknown, evidence: None }
}

/// What a log file holds from byte `from` on (what was logged since then).
pub fn log_since(path: &std::path::Path, from: u64) -> std::io::Result<String> {
    let bytes = std::fs::read(path)?;
    let from = usize::try_from(from).unwrap_or(usize::MAX).min(bytes.len());
    Ok(String::from_utf8_lossy(&bytes[from..]).into_owned())
}

/// The current length of a log file (0 if it does not exist yet).
pub fn log_len(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProviderKind::*;

    // Node 3's error log of `tandem bench --quick` on this machine, from its
    // start command until it was Synced: a restart after a clean stop, one
    // after kill -9, and its first join (a full SST by mariabackup).
    const TANDEM_IST: &str = include_str!("testdata/rejoin-tandem-ist.log");
    const TANDEM_IST_KILLED: &str = include_str!("testdata/rejoin-tandem-ist-after-kill.log");
    const TANDEM_SST: &str = include_str!("testdata/rejoin-tandem-sst-first-join.log");
    // Node 3 of `tandem cluster up` (mariabackup) restarted after a clean
    // stop, on 2026-11-30: its IST begins with the handshake.
    const TANDEM_IST_HANDSHAKE: &str = include_str!("testdata/rejoin-tandem-ist-handshake.log");
    const GALERA_IST: &str = include_str!("testdata/rejoin-galera-ist.log");
    const GALERA_IST_KILLED: &str = include_str!("testdata/rejoin-galera-ist-after-kill.log");
    const GALERA_SST: &str = include_str!("testdata/rejoin-galera-sst-first-join.log");

    #[test]
    fn tandem_restart_from_its_own_log_is_ist() {
        for log in [TANDEM_IST, TANDEM_IST_KILLED] {
            let d = decide(Tandem, log);
            assert_eq!(d.transfer, Transfer::Ist, "{d:?}");
            assert!(d.evidence.unwrap().contains("Resuming at local seqno"));
            assert!(!log.contains("wsrep_sst_mariabackup"), "these builds ran no SST script for an IST");
        }
    }

    #[test]
    fn tandem_ist_with_its_handshake_is_ist() {
        let d = decide(Tandem, TANDEM_IST_HANDSHAKE);
        assert_eq!(d.transfer, Transfer::Ist, "{d:?}");
        assert!(d.evidence.unwrap().contains("Resuming at local seqno"));
        // The joiner script runs, in bypass mode, and MariaDB says "SST
        // received": neither means a full transfer.
        assert!(TANDEM_IST_HANDSHAKE.contains("--role 'joiner'"));
        assert!(TANDEM_IST_HANDSHAKE.contains("IST handshake from"));
        assert!(TANDEM_IST_HANDSHAKE.contains("'xtrabackup_ist' received from donor: Running IST"));
    }

    #[test]
    fn tandem_joiner_script_run_is_sst() {
        let d = decide(Tandem, TANDEM_SST);
        assert_eq!(d.transfer, Transfer::Sst, "{d:?}");
        assert!(d.evidence.unwrap().contains("Proceeding with SST"));
    }

    #[test]
    fn tandem_fallback_is_sst_even_before_the_script_runs() {
        // The engine's message (crates/engine/src/core.rs), as the server logs it.
        let log = "2026-11-23  8:50:01 0 [Warning] WSREP: IST is not possible: local seqno 105 is older than \
                   the history the group still holds (from seqno 20311); falling back to a full state transfer (SST)\n";
        let d = decide(Tandem, log);
        assert_eq!(d.transfer, Transfer::Sst);
        assert!(d.evidence.unwrap().contains("falling back"));
        let other = "[Note] WSREP: Local state 5feb:10 belongs to another history than the group's (aa01): full state transfer (SST)";
        assert_eq!(decide(Tandem, other).transfer, Transfer::Sst);
        let asked = "[Note] WSREP: State transfer from 1fcd8381-218f-487b-83e1-e274bed69a4a requested";
        assert_eq!(decide(Tandem, asked).transfer, Transfer::Sst);
        // The joiner script alone is no evidence: it runs for an IST too.
        let script = "[Note] WSREP: Running: 'wsrep_sst_mariabackup --role 'joiner' --address '127.0.0.1:28180'";
        assert_eq!(decide(Tandem, script).transfer, Transfer::Unknown);
    }

    #[test]
    fn galera_bypass_is_ist() {
        for log in [GALERA_IST, GALERA_IST_KILLED] {
            let d = decide(Galera, log);
            assert_eq!(d.transfer, Transfer::Ist, "{d:?}");
            assert!(d.evidence.unwrap().contains("'xtrabackup_ist' received from donor: Running IST"));
            // Galera runs the joiner script for an IST too, and MariaDB then
            // says "SST received": neither means a full transfer.
            assert!(log.contains("--role 'joiner'"));
            assert!(log.contains("WSREP: SST received"));
            assert!(log.contains("WSREP: Receiving IST: 2002 writesets"));
        }
    }

    #[test]
    fn galera_full_backup_is_sst() {
        let d = decide(Galera, GALERA_SST);
        assert_eq!(d.transfer, Transfer::Sst, "{d:?}");
        assert!(d.evidence.unwrap().contains("Proceeding with SST"));
        // Galera follows its SST with an IST of what was ordered meanwhile.
        assert!(GALERA_SST.contains("WSREP: IST received:"));
    }

    #[test]
    fn sst_wins_over_ist() {
        // An SST followed by the IST of what was ordered meanwhile is an SST.
        let both = format!("{GALERA_SST}{GALERA_IST}");
        assert_eq!(decide(Galera, &both).transfer, Transfer::Sst);
        let both = format!("{TANDEM_IST}{TANDEM_SST}");
        assert_eq!(decide(Tandem, &both).transfer, Transfer::Sst);
    }

    #[test]
    fn nothing_said_is_unknown() {
        let d = decide(Galera, "2026-11-23  8:43:35 0 [Note] Starting MariaDB\n");
        assert_eq!(d, Decision { transfer: Transfer::Unknown, evidence: None });
        // Each provider's lines only count for that provider.
        assert_eq!(decide(Galera, "WSREP: Resuming at local seqno 5: ...").transfer, Transfer::Unknown);
        assert_eq!(decide(Tandem, "WSREP: IST received: 5feb:10").transfer, Transfer::Unknown);
    }

    #[test]
    fn the_excerpt_starts_at_the_offset() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("error.log");
        assert_eq!(log_len(&log), 0);
        std::fs::write(&log, "old start: Proceeding with SST\n").unwrap();
        let from = log_len(&log);
        let mut text = std::fs::read_to_string(&log).unwrap();
        text.push_str("WSREP: Resuming at local seqno 9: ...\n");
        std::fs::write(&log, text).unwrap();
        let since = log_since(&log, from).unwrap();
        assert_eq!(since, "WSREP: Resuming at local seqno 9: ...\n");
        assert_eq!(decide(Tandem, &since).transfer, Transfer::Ist);
        assert_eq!(log_since(&log, 10_000).unwrap(), "");
    }
}
