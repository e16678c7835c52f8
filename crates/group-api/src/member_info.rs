//! A member's self-description, and how it travels: the fields of the
//! first builds, then, appended to `app` only when they differ from the
//! defaults, its site (`gmcast.segment`, `pc.leader_segment`) and its weight
//! (`pc.weight`). Logs, snapshots and peers from before either existed read
//! unchanged, and read what this build writes: the weight's trailer comes
//! last, where builds that know weights only look for it, and the site's
//! stays in their `app`, which they carry on unchanged.

use serde::{Deserialize, Serialize};

/// Galera's range for `pc.weight`.
pub const MAX_WEIGHT: u32 = 255;

/// Ends `app` when the weight is not 1: the weight (u32, little endian),
/// then this mark. Logs, snapshots and peers from before weights existed
/// carry no mark and read as weight 1.
const WEIGHT_MARK: [u8; 8] = *b"\xf7tndmWGT";

/// Ends `app` (before a weight) when the member is not in segment 0 or
/// states a leader segment: segment, 1 if a leader segment follows, the
/// leader segment (or 0), a zero byte, then this mark.
const SITE_MARK: [u8; 8] = *b"\xf7tndmSEG";

/// Strips a trailer of `N` bytes and `mark` off the end of `app`, if there.
fn take_trailer<const N: usize>(app: &mut Vec<u8>, mark: &[u8; 8]) -> Option<[u8; N]> {
    if app.len() < N + mark.len() || !app.ends_with(mark) {
        return None;
    }
    let at = app.len() - N - mark.len();
    let bytes = app[at..at + N].try_into().expect("N bytes");
    app.truncate(at);
    Some(bytes)
}

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
        if info.segment != 0 || info.leader_segment.is_some() {
            let pin = info.leader_segment.unwrap_or(0);
            app.extend_from_slice(&[info.segment, u8::from(info.leader_segment.is_some()), pin, 0]);
            app.extend_from_slice(&SITE_MARK);
        }
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
        let weight = take_trailer::<4>(&mut app, &WEIGHT_MARK).map_or(1, u32::from_le_bytes);
        let site = take_trailer::<4>(&mut app, &SITE_MARK);
        let (segment, leader_segment) =
            site.map_or((0, None), |[segment, pinned, pin, _]| (segment, (pinned == 1).then_some(pin)));
        MemberInfo {
            uuid: wire.uuid,
            name: wire.name,
            group_addr: wire.group_addr,
            incoming: wire.incoming,
            app,
            weight,
            segment,
            leader_segment,
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
    /// `gmcast.segment`: the site this member is in (0 to 255).
    pub segment: u8,
    /// `pc.leader_segment`: the site this member asks the leader to be
    /// kept in; None: where most of the voting weight is.
    pub leader_segment: Option<u8>,
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
            segment: 0,
            leader_segment: None,
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
            ..MemberInfo::default()
        }
    }

    /// A build that knows weights and not sites.
    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    #[serde(from = "MemberInfoWire")]
    struct WeightsOnly {
        app: Vec<u8>,
        weight: u32,
    }

    impl From<MemberInfoWire> for WeightsOnly {
        fn from(wire: MemberInfoWire) -> Self {
            let mut app = wire.app;
            let weight = take_trailer::<4>(&mut app, &WEIGHT_MARK).map_or(1, u32::from_le_bytes);
            WeightsOnly { app, weight }
        }
    }

    #[test]
    fn sites_round_trip_and_builds_before_them_keep_their_weight() {
        for weight in [1, 3] {
            for (segment, leader_segment) in [(0, None), (1, None), (0, Some(0)), (2, Some(1)), (255, Some(255))] {
                let i = MemberInfo { segment, leader_segment, ..info(b"app", weight) };
                let bytes = bincode::serialize(&i).unwrap();
                assert_eq!(bincode::deserialize::<MemberInfo>(&bytes).unwrap(), i);
                let old: WeightsOnly = bincode::deserialize(&bytes).unwrap();
                assert_eq!(old.weight, weight, "a build before sites reads the weight");
                assert!(old.app.starts_with(b"app"), "and its app data first");
                if (segment, leader_segment) == (0, None) {
                    assert_eq!(old.app, b"app", "the defaults add nothing");
                }
            }
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
