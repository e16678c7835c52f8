//! Provider options in Galera's syntax and with Galera's names.
//!
//! Input is `key=value;key=value` (whitespace trimmed, `\` escapes `;` and
//! `=`). Output is every known key, sorted, as `key = value; ` because the
//! server and the MTR tests parse that exact text.

use std::collections::BTreeMap;
use std::time::Duration;

use tandem_group::Isolation;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Str,
    Bool,
    Int,
    /// An integer, 0 or more.
    Count,
    Float,
    /// A number from 0 to 1.
    Fraction,
    /// ISO-8601 duration (`PT30S`).
    Period,
    /// Bytes with an optional K/M/G/T suffix.
    Size,
    /// A seqno, -1, or `now` (PXC's `gcache.freeze_purge_at_seqno`).
    SeqnoOrNow,
    /// `refuse` or `sst`.
    UnknownPosition,
    /// `gmcast.isolate`: 0, 1 or 2.
    Isolation,
    /// `pc.weight`: 0 to 255, as in Galera.
    Weight,
    /// `gmcast.segment`: 0 to 255, as in Galera.
    Segment,
    /// `pc.leader_segment`: a segment, or -1 for none.
    LeaderSegment,
    /// A thread count, 1 to [`MAX_THREADS`].
    Threads,
}

/// More group threads than this would only be contention.
const MAX_THREADS: i64 = 64;

/// (key, default, kind). Defaults are Galera 26.4's; keys marked in the
/// comment are ones we act on, the rest are accepted and shown for
/// compatibility with existing configurations.
const KNOWN: &[(&str, &str, Kind)] = &[
    ("base_dir", ".", Kind::Str),
    ("base_host", "", Kind::Str),
    ("base_port", "4567", Kind::Int), // group listen port
    ("cert.log_conflicts", "no", Kind::Bool),
    ("cert.optimistic_pa", "yes", Kind::Bool),
    ("debug", "no", Kind::Bool),
    ("evs.auto_evict", "0", Kind::Int),
    ("evs.causal_keepalive_period", "PT1S", Kind::Period),
    ("evs.debug_log_mask", "0x1", Kind::Str),
    ("evs.delay_margin", "PT1S", Kind::Period),
    ("evs.delayed_keep_period", "PT30S", Kind::Period),
    ("evs.inactive_check_period", "PT0.5S", Kind::Period),
    ("evs.inactive_timeout", "PT15S", Kind::Period), // eviction
    ("evs.info_log_mask", "0", Kind::Str),
    ("evs.install_timeout", "PT7.5S", Kind::Period),
    ("evs.join_retrans_period", "PT1S", Kind::Period),
    ("evs.keepalive_period", "PT1S", Kind::Period), // heartbeat
    ("evs.max_install_timeouts", "3", Kind::Int),
    ("evs.send_window", "4", Kind::Int),
    ("evs.stats_report_period", "PT1M", Kind::Period),
    ("evs.suspect_timeout", "PT5S", Kind::Period), // leader loss / non-primary
    ("evs.use_aggregate", "true", Kind::Bool),
    ("evs.user_send_window", "2", Kind::Int),
    ("evs.version", "1", Kind::Int),
    ("evs.view_forget_timeout", "P1D", Kind::Period),
    ("gcache.dir", "", Kind::Str),
    ("gcache.freeze_purge_at_seqno", "-1", Kind::SeqnoOrNow), // purge freeze
    ("gcache.fsync", "no", Kind::Bool),                       // Tandem's: fsync before acknowledging
    ("gcache.keep_pages_count", "0", Kind::Int),
    ("gcache.keep_pages_size", "0", Kind::Size),
    ("gcache.mem_size", "0", Kind::Size),
    ("gcache.name", "galera.cache", Kind::Str), // log directory name
    ("gcache.page_size", "128M", Kind::Size),   // segment size (capped at size/8)
    ("gcache.recover", "yes", Kind::Bool),
    ("gcache.size", "128M", Kind::Size), // log bytes kept
    ("gcomm.thread_prio", "", Kind::Str),
    ("gcomm.threads", "1", Kind::Threads), // Tandem's: threads of the group runtime (docs/commit-path.md)
    ("gcs.fc_debug", "0", Kind::Int),
    ("gcs.fc_factor", "1.0", Kind::Fraction),
    ("gcs.fc_limit", "16", Kind::Count),
    ("gcs.fc_master_slave", "no", Kind::Bool),
    ("gcs.fc_single_primary", "no", Kind::Bool),
    ("gcs.max_packet_size", "64500", Kind::Int),
    ("gcs.max_throttle", "0.25", Kind::Float),
    ("gcs.recv_q_hard_limit", "9223372036854775807", Kind::Count),
    ("gcs.recv_q_soft_limit", "0.25", Kind::Fraction),
    ("gcs.send_window", "-1", Kind::Int), // Tandem's: write-sets a member may be behind in receiving, beyond its round trip (-1: 4 x gcs.fc_limit, 0: off)
    ("gcs.stateless", "no", Kind::Bool),
    ("gcs.sync_donor", "no", Kind::Bool),
    ("gcs.vote_policy", "0", Kind::Count), // consistency voting: successes that win outright
    ("gmcast.listen_addr", "tcp://0.0.0.0:4567", Kind::Str), // group listen address
    ("gmcast.mcast_addr", "", Kind::Str),
    ("gmcast.mcast_ttl", "1", Kind::Int),
    ("gmcast.peer_timeout", "PT3S", Kind::Period),
    ("gmcast.segment", "0", Kind::Segment), // the site (docs/operations.md, "Sites apart")
    ("gmcast.time_wait", "PT5S", Kind::Period),
    ("gmcast.version", "0", Kind::Int),
    ("health.address", "", Kind::Str), // Tandem's: HTTP health check and /metrics (host:port)
    ("health.agent_address", "", Kind::Str), // Tandem's: HAProxy agent check (host:port)
    ("health.donor_available", "no", Kind::Bool), // Tandem's: a donor/desynced node passes the checks
    ("health.lag_drain", "1000", Kind::Count), // Tandem's: write-sets behind at which the agent drains
    ("health.lag_drain_seconds", "0", Kind::Count), // Tandem's: seconds behind at which the agent drains (0: off)
    ("ist.batch_size", "4M", Kind::Size), // Tandem's: log bytes a restarting member asks a donor for at a time
    ("ist.recv_addr", "", Kind::Str),
    ("ist.recv_bind", "", Kind::Str),
    ("pc.announce_timeout", "PT3S", Kind::Period),
    ("pc.checksum", "false", Kind::Bool),
    ("pc.ignore_quorum", "false", Kind::Bool),
    ("pc.ignore_sb", "false", Kind::Bool),
    ("pc.leader_segment", "-1", Kind::LeaderSegment), // Tandem's: the segment the leader is kept in (-1: the heaviest)
    ("pc.linger", "PT20S", Kind::Period),
    ("pc.npvo", "false", Kind::Bool),
    ("pc.recovery", "true", Kind::Bool),
    ("pc.version", "0", Kind::Int),
    ("pc.wait_prim", "true", Kind::Bool),
    ("pc.wait_prim_timeout", "PT30S", Kind::Period),
    ("pc.wait_restored_prim_timeout", "PT0S", Kind::Period),
    ("pc.weight", "1", Kind::Weight), // acted on
    ("protonet.backend", "asio", Kind::Str),
    ("protonet.version", "0", Kind::Int),
    ("repl.causal_read_lease", "no", Kind::Bool), // Tandem's: causal reads on the leader's lease (docs/differences.md)
    ("repl.causal_read_timeout", "PT30S", Kind::Period), // sync_wait timeout
    ("repl.commit_order", "3", Kind::Int),
    ("repl.key_format", "FLAT8", Kind::Str),
    ("repl.max_ws_size", "2147483647", Kind::Int), // write-set size limit
    ("repl.proto_max", "11", Kind::Int),
    ("repl.unknown_position", "refuse", Kind::UnknownPosition), // Tandem's: after a crash without --wsrep-recover
    ("socket.checksum", "2", Kind::Int),
    ("socket.dynamic", "false", Kind::Bool),
    ("socket.recv_buf_size", "auto", Kind::Str),
    ("socket.send_buf_size", "auto", Kind::Str),
    ("socket.ssl", "NO", Kind::Bool),
    ("socket.ssl_ca", "", Kind::Str),
    ("socket.ssl_cert", "", Kind::Str),
    ("socket.ssl_cipher", "", Kind::Str),
    ("socket.ssl_compression", "YES", Kind::Bool),
    ("socket.ssl_key", "", Kind::Str),
    ("socket.ssl_verify_peer_name", "NO", Kind::Bool), // Tandem's: a dialled member's certificate names its address
];

/// Keys that trigger an action instead of holding a value.
const ACTIONS: &[(&str, Kind)] =
    &[("gmcast.isolate", Kind::Isolation), ("pc.bootstrap", Kind::Bool), ("socket.ssl_reload", Kind::Str)];

/// Read once, when the group channel opens: a `SET` of one of them would
/// show a value that is not in force. (`socket.ssl_reload` re-reads the
/// files they name.)
const STARTUP_ONLY: &[&str] = &[
    "socket.ssl",
    "socket.ssl_key",
    "socket.ssl_cert",
    "socket.ssl_ca",
    "socket.ssl_cipher",
    "socket.ssl_verify_peer_name",
    "socket.dynamic",
    // The applier queue is sized once.
    "gcs.recv_q_hard_limit",
    // The group runtime starts with its threads.
    "gcomm.threads",
    // The listeners open at init.
    "health.address",
    "health.agent_address",
    // A member's site travels in its membership entry, given when it joins.
    "gmcast.segment",
    "pc.leader_segment",
];

#[derive(Debug, Clone, PartialEq)]
pub enum OptionError {
    Syntax(String),
    UnknownKey(String),
    BadValue { key: String, value: String, why: String },
}

impl std::fmt::Display for OptionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OptionError::Syntax(s) => write!(f, "Syntax error in provider options: {s}"),
            OptionError::UnknownKey(k) => write!(f, "Unknown parameter '{k}'"),
            OptionError::BadValue { key, value, why } => write!(f, "Bad value '{value}' for parameter '{key}': {why}"),
        }
    }
}

/// An action requested through `options_set`.
#[derive(Debug, Clone, PartialEq)]
pub enum OptionAction {
    Isolate(Isolation),
    Bootstrap,
    /// `gcache.freeze_purge_at_seqno` was set: a seqno, `now` or -1.
    FreezePurge(String),
    /// `socket.ssl_reload`: re-read the certificate and key files.
    TlsReload,
    /// `pc.weight` changed: this node's weight in the quorum.
    Weight(u32),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    values: BTreeMap<String, String>,
}

impl Default for Options {
    fn default() -> Self {
        Options { values: KNOWN.iter().map(|(k, v, _)| (k.to_string(), v.to_string())).collect() }
    }
}

impl Options {
    /// Applies a `key=value;...` string; all-or-nothing.
    pub fn set(&mut self, input: &str) -> Result<Vec<OptionAction>, OptionError> {
        let pairs = parse(input)?;
        let mut next = self.values.clone();
        let mut actions = vec![];
        for (key, value) in pairs {
            if let Some((_, kind)) = ACTIONS.iter().find(|(k, _)| *k == key) {
                check(&key, &value, *kind)?;
                actions.extend(action(&key, &value));
                continue;
            }
            let Some((_, _, kind)) = KNOWN.iter().find(|(k, _, _)| *k == key) else {
                return Err(OptionError::UnknownKey(key));
            };
            check(&key, &value, *kind)?;
            if key == "gcache.freeze_purge_at_seqno" {
                actions.push(OptionAction::FreezePurge(value.clone()));
            }
            if key == "pc.weight" {
                actions.extend(action(&key, &value));
            }
            next.insert(key, value);
        }
        check_tls(&next)?;
        self.values = next;
        Ok(actions)
    }

    /// `set` for a running node: the keys read only at startup are refused.
    pub fn set_at_runtime(&mut self, input: &str) -> Result<Vec<OptionAction>, OptionError> {
        for (key, value) in parse(input)? {
            if STARTUP_ONLY.contains(&key.as_str()) && self.get(&key) != value {
                let why = if key.starts_with("socket.") {
                    "it is read only at startup (to use new certificate files, socket.ssl_reload=1)"
                } else {
                    "it is read only at startup"
                };
                return Err(OptionError::BadValue { key, value, why: why.into() });
            }
        }
        self.set(input)
    }

    /// Whether the group channel is to be encrypted: `socket.ssl=YES`, or a
    /// key and a certificate given (Galera turns TLS on for those alone).
    pub fn tls(&self) -> bool {
        self.bool("socket.ssl") || (!self.get("socket.ssl_key").is_empty() && !self.get("socket.ssl_cert").is_empty())
    }

    pub fn get(&self, key: &str) -> &str {
        self.values.get(key).map(String::as_str).unwrap_or("")
    }

    pub fn set_default(&mut self, key: &str, value: &str) {
        self.values.insert(key.to_string(), value.to_string());
    }

    pub fn period(&self, key: &str) -> Duration {
        parse_period(self.get(key)).unwrap_or(Duration::from_secs(1))
    }

    pub fn int(&self, key: &str) -> i64 {
        self.get(key).parse().unwrap_or(0)
    }

    pub fn size(&self, key: &str) -> u64 {
        parse_size(self.get(key)).unwrap_or(0)
    }

    pub fn bool(&self, key: &str) -> bool {
        parse_bool(self.get(key)).unwrap_or(false)
    }

    /// Galera's `key = value; ` rendering, sorted by key.
    pub fn render(&self) -> String {
        // MariaDB's FLUSH SSL sets socket.ssl_reload only if it is listed.
        let reload = self.tls().then_some(("socket.ssl_reload", "1"));
        let mut shown: BTreeMap<&str, &str> = self.values.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        shown.extend(reload);
        shown.iter().map(|(k, v)| format!("{k} = {v}; ")).collect()
    }
}

/// A setting that asks for TLS must get it or be refused: never plaintext
/// while encryption was asked for.
fn check_tls(values: &BTreeMap<String, String>) -> Result<(), OptionError> {
    let get = |key: &str| values.get(key).map(String::as_str).unwrap_or("");
    let cipher = get("socket.ssl_cipher");
    if let Err(why) = tandem_group::check_cipher_list(cipher) {
        return Err(OptionError::BadValue { key: "socket.ssl_cipher".into(), value: cipher.into(), why });
    }
    let asks = parse_bool(get("socket.ssl")) == Some(true)
        || ["socket.ssl_key", "socket.ssl_cert", "socket.ssl_ca"].iter().any(|k| !get(k).is_empty());
    let missing: Vec<&str> = ["socket.ssl_cert", "socket.ssl_key"].into_iter().filter(|k| get(k).is_empty()).collect();
    if asks && !missing.is_empty() {
        let (key, value) = if parse_bool(get("socket.ssl")) == Some(true) {
            ("socket.ssl", get("socket.ssl"))
        } else {
            ["socket.ssl_key", "socket.ssl_cert", "socket.ssl_ca"]
                .into_iter()
                .find(|k| !get(k).is_empty())
                .map(|k| (k, get(k)))
                .unwrap_or(("socket.ssl", ""))
        };
        return Err(OptionError::BadValue {
            key: key.into(),
            value: value.into(),
            why: format!(
                "TLS on the group channel needs a certificate and its key: {} not set. It will not run in \
                 plaintext while encryption is asked for",
                missing.join(" and ")
            ),
        });
    }
    Ok(())
}

fn action(key: &str, value: &str) -> Option<OptionAction> {
    match key {
        "gmcast.isolate" => Some(OptionAction::Isolate(match value.trim() {
            "1" => Isolation::Isolated,
            "2" => Isolation::Terminated,
            _ => Isolation::Off,
        })),
        "pc.bootstrap" if parse_bool(value) == Some(true) => Some(OptionAction::Bootstrap),
        "pc.weight" => parse_weight(value).map(OptionAction::Weight),
        "socket.ssl_reload" if parse_bool(value) != Some(false) => Some(OptionAction::TlsReload),
        _ => None,
    }
}

/// Splits on unescaped `;`, then on the first unescaped `=`.
fn parse(input: &str) -> Result<Vec<(String, String)>, OptionError> {
    let mut out = vec![];
    for item in split_unescaped(input, ';') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let parts = split_unescaped(item, '=');
        if parts.len() != 2 {
            return Err(OptionError::Syntax(format!("expected key=value, got '{item}'")));
        }
        let key = unescape(parts[0].trim());
        if key.is_empty() {
            return Err(OptionError::Syntax(format!("empty key in '{item}'")));
        }
        out.push((key, unescape(parts[1].trim())));
    }
    Ok(out)
}

fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut escaped = false;
    for c in s.chars() {
        match c {
            _ if escaped => {
                parts.last_mut().unwrap().extend(['\\', c]);
                escaped = false;
            }
            '\\' => escaped = true,
            c if c == sep => parts.push(String::new()),
            c => parts.last_mut().unwrap().push(c),
        }
    }
    parts
}

fn unescape(s: &str) -> String {
    s.replace("\\;", ";").replace("\\=", "=")
}

fn check(key: &str, value: &str, kind: Kind) -> Result<(), OptionError> {
    let ok = match kind {
        Kind::Str => true,
        Kind::Bool => parse_bool(value).is_some(),
        Kind::Int => value.parse::<i64>().is_ok(),
        Kind::Count => value.parse::<i64>().is_ok_and(|n| n >= 0),
        Kind::Float => value.parse::<f64>().is_ok(),
        Kind::Fraction => value.parse::<f64>().is_ok_and(|f| (0.0..=1.0).contains(&f)),
        Kind::Period => parse_period(value).is_some(),
        Kind::Size => parse_size(value).is_some(),
        Kind::SeqnoOrNow => value.eq_ignore_ascii_case("now") || value.parse::<i64>().is_ok_and(|n| n >= -1),
        Kind::UnknownPosition => matches!(value.to_ascii_lowercase().as_str(), "refuse" | "sst"),
        Kind::Isolation => matches!(value.trim(), "0" | "1" | "2"),
        Kind::Weight => parse_weight(value).is_some(),
        Kind::Segment => parse_segment(value).is_some(),
        Kind::LeaderSegment => parse_leader_segment(value).is_some(),
        Kind::Threads => value.trim().parse::<i64>().is_ok_and(|n| (1..=MAX_THREADS).contains(&n)),
    };
    if ok {
        Ok(())
    } else {
        let why = match kind {
            Kind::Isolation => "expected 0, 1 or 2".into(),
            Kind::Weight => "expected a weight from 0 to 255".into(),
            Kind::Segment => "expected a segment from 0 to 255".into(),
            Kind::LeaderSegment => "expected a segment from 0 to 255, or -1 (the segment with the most weight)".into(),
            Kind::Threads => format!("expected a number of threads from 1 to {MAX_THREADS}"),
            _ => format!("expected {kind:?}").to_lowercase(),
        };
        Err(OptionError::BadValue { key: key.into(), value: value.into(), why })
    }
}

/// `pc.weight`.
pub fn parse_weight(v: &str) -> Option<u32> {
    v.trim().parse::<u32>().ok().filter(|w| *w <= 255)
}

/// `gmcast.segment`.
pub fn parse_segment(v: &str) -> Option<u8> {
    v.trim().parse::<u8>().ok()
}

/// `pc.leader_segment`: Some(None) for -1.
pub fn parse_leader_segment(v: &str) -> Option<Option<u8>> {
    match v.trim() {
        "-1" => Some(None),
        other => parse_segment(other).map(Some),
    }
}

pub fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "yes" | "true" | "on" | "y" => Some(true),
        "0" | "no" | "false" | "off" | "n" => Some(false),
        _ => None,
    }
}

/// `PT30S`, `PT1M`, `PT0.5S`, `P1D`, `PT1H2M3.5S`; a bare number is seconds.
pub fn parse_period(v: &str) -> Option<Duration> {
    if let Ok(secs) = v.parse::<f64>() {
        return (secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let rest = v.strip_prefix('P')?;
    let (date, time) = rest.split_once('T').unwrap_or((rest, ""));
    let mut total = 0.0;
    for (part, units) in [
        (date, &[('Y', 31_536_000.0), ('M', 2_592_000.0), ('W', 604_800.0), ('D', 86_400.0)][..]),
        (time, &[('H', 3600.0), ('M', 60.0), ('S', 1.0)][..]),
    ] {
        let mut num = String::new();
        for c in part.chars() {
            if c.is_ascii_digit() || c == '.' {
                num.push(c);
            } else {
                let (_, scale) = units.iter().find(|(u, _)| *u == c)?;
                total += num.parse::<f64>().ok()? * scale;
                num.clear();
            }
        }
        if !num.is_empty() {
            return None;
        }
    }
    Some(Duration::from_secs_f64(total))
}

pub fn parse_size(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, scale) = match v.chars().last()?.to_ascii_uppercase() {
        'K' => (&v[..v.len() - 1], 1u64 << 10),
        'M' => (&v[..v.len() - 1], 1 << 20),
        'G' => (&v[..v.len() - 1], 1 << 30),
        'T' => (&v[..v.len() - 1], 1 << 40),
        _ => (v, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_sorted_galera_format() {
        let o = Options::default();
        let text = o.render();
        assert!(text.starts_with("base_dir = .; base_host = ; base_port = 4567; "));
        assert!(text.contains("repl.max_ws_size = 2147483647; "));
        assert!(text.ends_with("socket.ssl_key = ; socket.ssl_verify_peer_name = NO; "));
        assert!(!text.contains("socket.ssl_reload"), "no reload to offer without TLS");
        let mut tls = Options::default();
        tls.set("socket.ssl=YES; socket.ssl_key=k.pem; socket.ssl_cert=c.pem").unwrap();
        assert!(tls.render().contains("socket.ssl_reload = 1; "), "listed, so that FLUSH SSL reaches us");
    }

    #[test]
    fn sets_known_keys_with_whitespace_and_empty_items() {
        let mut o = Options::default();
        assert_eq!(o.set(" gcache.size = 10M ;; repl.causal_read_timeout=PT90S;"), Ok(vec![]));
        assert_eq!(o.get("gcache.size"), "10M");
        assert_eq!(o.period("repl.causal_read_timeout"), Duration::from_secs(90));
        assert_eq!(o.set(""), Ok(vec![]));
        assert_eq!(o.set(" "), Ok(vec![]));
    }

    #[test]
    fn rejects_unknown_keys_and_bad_syntax_without_changing_anything() {
        let mut o = Options::default();
        assert_eq!(o.set("gcache.size=1M;bogus=1"), Err(OptionError::UnknownKey("bogus".into())));
        assert_eq!(o.get("gcache.size"), "128M", "all or nothing");
        assert!(matches!(o.set("a"), Err(OptionError::Syntax(_))));
        assert!(matches!(o.set("=1"), Err(OptionError::Syntax(_))));
        assert!(matches!(o.set("a=b=c"), Err(OptionError::Syntax(_))));
        assert!(matches!(o.set("evs.suspect_timeout=soon"), Err(OptionError::BadValue { .. })));
        assert!(matches!(o.set("gcs.fc_limit=many"), Err(OptionError::BadValue { .. })));
        assert!(matches!(o.set("gcs.fc_limit=-1"), Err(OptionError::BadValue { .. })));
        assert!(matches!(o.set("gcs.fc_factor=1.5"), Err(OptionError::BadValue { .. })));
        assert!(matches!(o.set("gcs.recv_q_soft_limit=-0.1"), Err(OptionError::BadValue { .. })));
        assert_eq!(o.set("gcs.fc_limit=100;gcs.fc_factor=0.8"), Ok(vec![]));
    }

    #[test]
    fn actions_are_reported_not_stored() {
        let mut o = Options::default();
        assert_eq!(o.set("gmcast.isolate=1"), Ok(vec![OptionAction::Isolate(Isolation::Isolated)]));
        assert_eq!(o.set("gmcast.isolate = 2"), Ok(vec![OptionAction::Isolate(Isolation::Terminated)]));
        assert_eq!(o.set("gmcast.isolate=0"), Ok(vec![OptionAction::Isolate(Isolation::Off)]));
        for (value, ok) in [("0", true), ("255", true), ("256", false), ("-1", false), ("one", false)] {
            assert_eq!(o.set(&format!("gmcast.segment={value}")).is_ok(), ok, "gmcast.segment={value}");
        }
        for (value, ok) in [("-1", true), ("0", true), ("7", true), ("256", false), ("-2", false)] {
            assert_eq!(o.set(&format!("pc.leader_segment={value}")).is_ok(), ok, "pc.leader_segment={value}");
        }
        assert_eq!(parse_leader_segment("-1"), Some(None));
        assert_eq!(parse_leader_segment(" 2 "), Some(Some(2)));
        let mut running = Options::default();
        let err = running.set_at_runtime("gmcast.segment=1").unwrap_err().to_string();
        assert!(err.contains("read only at startup"), "{err}");
        assert_eq!(o.set("pc.weight=3"), Ok(vec![OptionAction::Weight(3)]));
        assert_eq!(o.set("pc.weight = 0"), Ok(vec![OptionAction::Weight(0)]));
        assert!(o.get("pc.weight").trim() == "0", "the value shown is the one set");
        for bad in ["256", "-1", "two", ""] {
            assert!(o.set(&format!("pc.weight={bad}")).is_err(), "pc.weight={bad} must be refused");
        }
        assert!(matches!(o.set("gmcast.isolate=3"), Err(OptionError::BadValue { .. })));
        assert!(matches!(o.set("gmcast.isolate=yes"), Err(OptionError::BadValue { .. })));
        assert_eq!(o.set("pc.bootstrap=YES"), Ok(vec![OptionAction::Bootstrap]));
        assert!(!o.render().contains("gmcast.isolate"));
    }

    #[test]
    fn tls_is_on_with_socket_ssl_or_a_key_and_certificate() {
        let mut o = Options::default();
        assert!(!o.tls());
        o.set("socket.ssl_key=k.pem; socket.ssl_cert=c.pem").unwrap();
        assert!(o.tls(), "Galera turns TLS on for a key and certificate alone");
        let mut o = Options::default();
        o.set("socket.ssl=YES; socket.ssl_key=k.pem; socket.ssl_cert=c.pem; socket.ssl_ca=ca.pem").unwrap();
        assert!(o.tls());
        assert_eq!(o.set("socket.ssl_reload=1"), Ok(vec![OptionAction::TlsReload]));
        assert!(o.render().contains("socket.ssl_reload = 1; "), "an action, listed for FLUSH SSL");
        assert!(o.render().matches("ssl_reload").count() == 1, "not stored as a setting");
    }

    #[test]
    fn asking_for_tls_without_a_key_pair_or_with_a_malformed_cipher_list_is_refused_and_changes_nothing() {
        let mut o = Options::default();
        o.set("gcache.size=1M").unwrap();
        for (asks, names) in [
            ("socket.ssl=YES", "socket.ssl_cert and socket.ssl_key not set"),
            ("socket.ssl=1; socket.ssl_cert=c.pem", "socket.ssl_key not set"),
            ("socket.ssl_ca=/etc/mysql/ca.pem", "socket.ssl_cert and socket.ssl_key not set"),
            ("socket.ssl_key=k.pem", "socket.ssl_cert not set"),
            (
                "gcache.size=2M; socket.ssl_key=k.pem; socket.ssl_cert=c.pem; socket.ssl_cipher=AES128/SHA",
                "not a cipher name",
            ),
        ] {
            let text = o.set(asks).expect_err(asks).to_string();
            assert!(text.contains(names), "{asks}: {text}");
            assert!(text.contains("socket.ssl"), "{asks}: the setting is named: {text}");
            assert_eq!(o.get("gcache.size"), "1M", "{asks}: all or nothing");
        }
        // A cipher we lack is not a malformed option: the provider reports it.
        assert_eq!(o.set("socket.ssl_key=k.pem; socket.ssl_cert=c.pem; socket.ssl_cipher=AES256-SHA"), Ok(vec![]));
        assert_eq!(
            o.set("socket.ssl=NO; socket.ssl_key=; socket.ssl_cert=; socket.ssl_cipher=; socket.ssl_compression=YES"),
            Ok(vec![])
        );
        assert_eq!(o.get("socket.ssl"), "NO");
    }

    #[test]
    fn tls_settings_are_startup_only() {
        let mut o = Options::default();
        o.set("socket.ssl=YES; socket.ssl_key=k.pem; socket.ssl_cert=c.pem").unwrap();
        let text = o.set_at_runtime("socket.ssl_cert=other.pem").unwrap_err().to_string();
        assert!(text.contains("read only at startup") && text.contains("socket.ssl_reload"), "{text}");
        assert_eq!(o.get("socket.ssl_cert"), "c.pem");
        assert!(o.set_at_runtime("socket.ssl=NO").is_err(), "no silent switch to plaintext");
        assert_eq!(o.set_at_runtime("socket.ssl_cert=c.pem; gcache.size=2M"), Ok(vec![]), "unchanged values pass");
        assert_eq!(o.set_at_runtime("socket.ssl_reload=1"), Ok(vec![OptionAction::TlsReload]));
    }

    #[test]
    fn group_threads_are_one_to_sixty_four_and_startup_only() {
        let mut o = Options::default();
        assert_eq!(o.int("gcomm.threads"), 1, "one, like Galera's gcomm thread");
        for bad in ["0", "65", "-1", "two"] {
            let text = o.set(&format!("gcomm.threads={bad}")).unwrap_err().to_string();
            assert!(text.contains("from 1 to 64"), "{bad}: {text}");
        }
        assert_eq!(o.int("gcomm.threads"), 1, "a refused value changes nothing");
        o.set("gcomm.threads=4").unwrap();
        assert_eq!(o.int("gcomm.threads"), 4);
        let text = o.set_at_runtime("gcomm.threads=2").unwrap_err().to_string();
        assert!(text.contains("read only at startup"), "{text}");
        assert_eq!(o.set_at_runtime("gcomm.threads=4"), Ok(vec![]), "the value in force passes");
    }

    #[test]
    fn escapes_and_periods_and_sizes() {
        let mut o = Options::default();
        o.set(r"evs.debug_log_mask=a\;b").unwrap();
        assert_eq!(o.get("evs.debug_log_mask"), "a;b");
        assert_eq!(parse_period("PT0.5S"), Some(Duration::from_millis(500)));
        assert_eq!(parse_period("P1D"), Some(Duration::from_secs(86_400)));
        assert_eq!(parse_period("PT1H2M3S"), Some(Duration::from_secs(3723)));
        assert_eq!(parse_period("PTXS"), None);
        assert_eq!(parse_size("10M"), Some(10 << 20));
        assert_eq!(parse_size("x"), None);
    }
}
