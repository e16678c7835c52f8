//! Identities and positions: uuids, seqnos, gtids.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A global sequence number. `-1` means undefined, as in the wsrep API.
pub type Seqno = i64;
pub const SEQNO_UNDEFINED: Seqno = -1;

/// A 16-byte id printed as a canonical UUID (node ids, group/state ids).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    pub const NIL: Uuid = Uuid([0; 16]);

    /// A random version-4 uuid. wsrep-lib prints ids that look like short ASCII
    /// strings as text, so ids must be real random uuids.
    pub fn random() -> Uuid {
        let mut b: [u8; 16] = rand::random();
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        Uuid(b)
    }

    pub fn is_nil(&self) -> bool {
        self.0 == [0; 16]
    }

    /// Parses `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (case-insensitive).
    pub fn parse(s: &str) -> Option<Uuid> {
        let hex: Vec<u8> = s.bytes().filter(|b| *b != b'-').collect();
        if hex.len() != 32 || s.len() != 36 {
            return None;
        }
        let mut out = [0u8; 16];
        for (i, pair) in hex.chunks(2).enumerate() {
            let text = std::str::from_utf8(pair).ok()?;
            out[i] = u8::from_str_radix(text, 16).ok()?;
        }
        Some(Uuid(out))
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        for (i, byte) in b.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A position in a history: `uuid:seqno`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct Gtid {
    pub uuid: Uuid,
    pub seqno: Seqno,
}

impl Gtid {
    pub const UNDEFINED: Gtid = Gtid { uuid: Uuid::NIL, seqno: SEQNO_UNDEFINED };

    pub fn parse(s: &str) -> Option<Gtid> {
        let (u, n) = s.trim().rsplit_once(':')?;
        Some(Gtid { uuid: Uuid::parse(u)?, seqno: n.parse().ok()? })
    }
}

impl fmt::Display for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.uuid, self.seqno)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_round_trips_through_text() {
        let u = Uuid::random();
        let text = u.to_string();
        assert_eq!(text.len(), 36);
        assert_eq!(Uuid::parse(&text), Some(u));
        assert_eq!(u.0[6] >> 4, 4, "version nibble");
    }

    #[test]
    fn gtid_parses_and_rejects() {
        let g = Gtid::parse("6fd8bd6e-3e3a-11ef-9e4e-8f8b4b7c1f2a:42").unwrap();
        assert_eq!(g.seqno, 42);
        assert_eq!(g.to_string(), "6fd8bd6e-3e3a-11ef-9e4e-8f8b4b7c1f2a:42");
        assert!(Gtid::parse("not-a-gtid:1").is_none());
        assert!(Gtid::parse("6fd8bd6e-3e3a-11ef-9e4e-8f8b4b7c1f2a").is_none());
        assert_eq!(Gtid::parse("00000000-0000-0000-0000-000000000000:-1"), Some(Gtid::UNDEFINED));
    }
}
