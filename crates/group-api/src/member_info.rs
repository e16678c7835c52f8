//! A member's self-description, and how it travels: the fields of the
//! first builds, then the weight (`pc.weight`) appended to `app` only when
//! it is not 1, so that logs, snapshots and peers from before weights
//! existed read unchanged, and read what this build writes.

use serde::{Deserialize, Serialize};

/// Galera's range for `pc.weight`.
pub const MAX_WEIGHT: u32 = 255;

/// Ends `app` when the weight is not 1: the weight (u32, little endian),
/// then this mark. Logs, snapshots and peers from before weights existed
/// carry no mark and read as weight 1.
const WEIGHT_MARK: [u8; 8] = *b"\xf7tndmWGT";

/// How a [`MemberInfo`] is encoded: its fields before weights existed.
#[derive(Serialize, Deserialize)]
pub(crate) struct MemberInfoWire {
    uuid: [u8; 16],
    name: String,
    group_addr: String,
    incoming: String,
    app: Vec<u8>,
}

impl From<MemberInfo> for MemberInfoWire {
    fn from(info: MemberInfo) -> Self {
        let mut app = info.app;
        if info.weight != 1 {
            app.extend_from_slice(&info.weight.to_le_bytes());
            app.extend_from_slice(&WEIGHT_MARK);
        }
        MemberInfoWire { uuid: info.uuid, name: info.name, group_addr: info.group_addr, incoming: info.incoming, app }
    }
}

impl From<MemberInfoWire> for MemberInfo {
    fn from(wire: MemberInfoWire) -> Self {
        let mut app = wire.app;
        let mut weight = 1;
        if app.len() >= 12 && app.ends_with(&WEIGHT_MARK) {
            let at = app.len() - 12;
            weight = u32::from_le_bytes(app[at..at + 4].try_into().expect("four bytes"));
            app.truncate(at);
        }
        MemberInfo {
            uuid: wire.uuid,
            name: wire.name,
            group_addr: wire.group_addr,
            incoming: wire.incoming,
            app,
            weight,
        }
    }
}

/// What a member tells the others about itself when it joins.
///
/// Encoded through [`MemberInfoWire`]: the weight travels at the end
/// of `app`, and only when it is not 1, so that logs and snapshots written
/// before weights existed read unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "MemberInfoWire", into = "MemberInfoWire")]
pub struct MemberInfo {
    /// The wsrep node id (Galera's gcomm uuid), random per incarnation.
    pub uuid: [u8; 16],
    /// `wsrep_node_name`.
    pub name: String,
    /// `host:port` of this member's group listener.
    pub group_addr: String,
    /// `wsrep_node_incoming_address`: where clients reach this member.
    pub incoming: String,
    /// Opaque data of the application, carried unchanged in every membership
    /// (the engine puts the position a bootstrapping member starts from here,
    /// so every replica derives the same group uuid and first seqno).
    pub app: Vec<u8>,
    /// `pc.weight`: what this member counts for in the quorum (0 to 255).
    pub weight: u32,
}

impl Default for MemberInfo {
    fn default() -> Self {
        MemberInfo {
            uuid: [0; 16],
            name: String::new(),
            group_addr: String::new(),
            incoming: String::new(),
            app: vec![],
            weight: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(app: &[u8], weight: u32) -> MemberInfo {
        MemberInfo {
            uuid: [3; 16],
            name: "node3".into(),
            group_addr: "127.0.0.1:4567".into(),
            incoming: "127.0.0.1:3306".into(),
            app: app.to_vec(),
            weight,
        }
    }

    /// The fields as builds before weights encoded them.
    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Before {
        uuid: [u8; 16],
        name: String,
        group_addr: String,
        incoming: String,
        app: Vec<u8>,
    }

    #[test]
    fn a_weight_of_one_encodes_exactly_as_before_weights_existed() {
        let i = info(b"join info", 1);
        let bytes = bincode::serialize(&i).unwrap();
        let before: Before = bincode::deserialize(&bytes).unwrap();
        assert_eq!(before.app, b"join info");
        assert_eq!(bincode::serialize(&before).unwrap(), bytes);
        assert_eq!(bincode::deserialize::<MemberInfo>(&bytes).unwrap(), i);
    }

    #[test]
    fn other_weights_round_trip_and_old_readers_keep_their_app_prefix() {
        for weight in [0, 2, 3, MAX_WEIGHT] {
            for app in [&b""[..], b"x", b"a longer join info"] {
                let i = info(app, weight);
                let bytes = bincode::serialize(&i).unwrap();
                assert_eq!(bincode::deserialize::<MemberInfo>(&bytes).unwrap(), i);
                let before: Before = bincode::deserialize(&bytes).unwrap();
                assert!(before.app.starts_with(app), "an old build reads the app data first");
            }
        }
    }

    #[test]
    fn app_data_that_merely_ends_like_a_weight_is_not_misread_unless_marked() {
        // Twelve bytes without the mark: weight 1, app untouched.
        let i = info(&[7; 12], 1);
        let back: MemberInfo = bincode::deserialize(&bincode::serialize(&i).unwrap()).unwrap();
        assert_eq!(back, i);
        // Shorter than a weight and its mark: untouched too.
        let short = Before {
            uuid: [0; 16],
            name: String::new(),
            group_addr: String::new(),
            incoming: String::new(),
            app: WEIGHT_MARK.to_vec(),
        };
        let back: MemberInfo = bincode::deserialize(&bincode::serialize(&short).unwrap()).unwrap();
        assert_eq!((back.weight, back.app), (1, WEIGHT_MARK.to_vec()));
    }
}
