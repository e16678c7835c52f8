//! How the transfer runs: the `[sst]` group of the server's option files
//! (read with `my_print_defaults`, as the stock scripts do) and, for TLS,
//! the group's own identity from `wsrep_provider_options`.
//!
//! A cluster whose group channel is encrypted gets an encrypted state
//! transfer with the same certificates, without a word of configuration:
//! the data of a state transfer is the whole database, and a plaintext copy
//! beside an encrypted group would be a silent hole. Turning it off takes
//! an explicit `encrypt=0` in `[sst]`, and is logged.

use super::args::SstArgs;
use super::wire::Compression;
use crate::option_files::parse_provider_options;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Parallel data connections (`[sst] streams`).
    pub streams: u16,
    /// How long the joiner waits for the donor, and the donor for the
    /// server's read lock (`[sst] timeout`, seconds).
    pub timeout: Duration,
    /// How long a connection may stay silent mid-transfer (`[sst] idle-timeout`).
    pub idle_timeout: Duration,
    /// The donor's cap in bytes per second (`[sst] rlimit`, as for `pv -L`).
    pub rlimit: Option<u64>,
    /// How the donor compresses (`[sst] compression`, `compression-level`);
    /// the joiner takes whatever arrives.
    pub compression: Option<Compression>,
    pub tls: Option<TlsSource>,
    /// `encrypt=0` over an encrypted group: said in the log.
    pub plaintext_by_choice: bool,
    /// `[sst]` keys of mariabackup's method that this one does not use,
    /// said in the log rather than passed over in silence.
    pub ignored: Vec<String>,
}

/// The certificate files, and which option named them (for messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSource {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
    pub ciphers: String,
    pub from: &'static str,
}

const DEFAULT_TIMEOUT_S: u64 = 300;
/// mariabackup's compression settings: commands for its pipeline, which
/// this method has not. Its own is `compression`, off by default: on links
/// faster than about 200 MB/s compression costs more than it saves
/// (measured in `shared/reference/sst-contract.md`, §3.2, and for this
/// method in `docs/benchmarks-sst.md`).
const IGNORED: [&str; 4] = ["compressor", "decompressor", "compress", "backup-threads"];
const DEFAULT_IDLE_S: u64 = 120;

impl Settings {
    /// Reads the option files the server was given, then its command line.
    pub fn load(args: &SstArgs) -> Result<Settings> {
        let sst = print_defaults(args, &["sst"])?;
        let server = print_defaults(args, &["mysqld", "server", "mariadb", "mariadbd", "galera"])?;
        let dirs: Vec<(&str, String)> = DATA_DIR_OPTIONS
            .iter()
            .filter_map(|&name| {
                let value = args.server_option(name).or_else(|| server.get(name).cloned())?;
                Some((name, value))
            })
            .chain(std::env::var("INNODB_DATA_HOME_DIR").ok().map(|v| ("innodb-data-home-dir", v)))
            .collect();
        check_layout(&args.datadir, &dirs)?;
        let mut provider_options = server.get("wsrep-provider-options").cloned().unwrap_or_default();
        if let Some(cli) = args.server_option("wsrep_provider_options") {
            provider_options = format!("{provider_options};{cli}");
        }
        Settings::from_parts(&sst, &provider_options)
    }

    /// The decision, from the `[sst]` keys (dashes, not underscores) and
    /// the provider options text.
    pub fn from_parts(sst: &BTreeMap<String, String>, provider_options: &str) -> Result<Settings> {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let streams = match sst.get("streams") {
            Some(v) => v
                .parse::<u16>()
                .ok()
                .filter(|n| (1..=64).contains(n))
                .with_context(|| format!("[sst] streams={v}: expected a number from 1 to 64"))?,
            None => cores.clamp(2, 4) as u16,
        };
        let seconds = |key: &str, default: u64| -> Result<Duration> {
            match sst.get(key) {
                None => Ok(Duration::from_secs(default)),
                Some(v) => v
                    .parse::<u64>()
                    .ok()
                    .filter(|s| *s > 0)
                    .map(Duration::from_secs)
                    .with_context(|| format!("[sst] {key}={v}: expected a number of seconds")),
            }
        };
        let rlimit = match sst.get("rlimit") {
            None => None,
            Some(v) => Some(super::pacer::parse_rate(v).map_err(|e| anyhow::anyhow!("[sst] rlimit={v}: {e}"))?),
        };
        let compression = compression(sst)?;
        let (tls, plaintext_by_choice) = tls_source(sst, provider_options)?;
        let ignored = IGNORED.iter().filter_map(|k| sst.get(*k).map(|v| format!("{k}={v}"))).collect();
        Ok(Settings {
            ignored,
            streams,
            timeout: seconds("timeout", DEFAULT_TIMEOUT_S)?,
            idle_timeout: seconds("idle-timeout", DEFAULT_IDLE_S)?,
            rlimit,
            compression,
            tls,
            plaintext_by_choice,
        })
    }
}

/// `compression=none|lz4|zstd`, and for zstd `compression-level` (1 to 19,
/// default 1: its fastest, already smaller than lz4).
fn compression(sst: &BTreeMap<String, String>) -> Result<Option<Compression>> {
    let level = match sst.get("compression-level") {
        None => None,
        Some(v) => Some(
            v.parse::<i32>()
                .ok()
                .filter(|l| (1..=19).contains(l))
                .with_context(|| format!("[sst] compression-level={v}: expected a zstd level from 1 to 19"))?,
        ),
    };
    let how = match sst.get("compression").map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("none" | "off" | "0" | "") => None,
        Some("lz4") => Some(Compression::Lz4),
        Some("zstd") => Some(Compression::Zstd { level: level.unwrap_or(1) }),
        Some(other) => bail!("[sst] compression={other}: expected none, lz4 or zstd"),
    };
    if level.is_some() && !matches!(how, Some(Compression::Zstd { .. })) {
        bail!("[sst] compression-level is for compression=zstd");
    }
    Ok(how)
}

/// Server options that can put data outside the data directory.
const DATA_DIR_OPTIONS: [&str; 4] =
    ["innodb-data-home-dir", "innodb-log-group-home-dir", "innodb-undo-directory", "aria-log-dir-path"];

/// This method copies the data directory and nothing else: a server that
/// keeps tablespaces, redo, undo or Aria logs elsewhere would get a joiner
/// without them. Refused, by name, before anything is locked or sent.
pub fn check_layout(datadir: &Path, dirs: &[(&str, String)]) -> Result<()> {
    let inside = |value: &str| {
        let path = datadir.join(value);
        let (a, b) = (normalize(&path), normalize(datadir));
        a == b
            || std::fs::canonicalize(&path).ok().zip(std::fs::canonicalize(datadir).ok()).is_some_and(|(x, y)| x == y)
    };
    for (name, value) in dirs {
        if !value.is_empty() && !inside(value) {
            bail!(
                "{}={value} is outside the data directory {}: the tandem SST method copies the data directory \
                 only (use wsrep_sst_method=mariabackup for this server)",
                name.replace('-', "_"),
                datadir.display()
            );
        }
    }
    Ok(())
}

/// `a/./b/` -> `a/b`, and `a/b/..` -> `a`, without touching the disk.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn tls_source(sst: &BTreeMap<String, String>, provider_options: &str) -> Result<(Option<TlsSource>, bool)> {
    let group = parse_provider_options(provider_options);
    let group_get = |k: &str| group.get(k).map(String::as_str).filter(|v| !v.is_empty());
    let group_tls = group_get("socket.ssl_cert").is_some()
        || group_get("socket.ssl")
            .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "yes" | "1" | "on" | "true"));
    let sst_get = |a: &str, b: &str| sst.get(a).or_else(|| sst.get(b)).filter(|v| !v.is_empty()).cloned();
    match sst.get("encrypt").map(String::as_str) {
        Some("0") => return Ok((None, group_tls)),
        Some("1") => bail!(
            "[sst] encrypt=1 (xbcrypt) is mariabackup's; the tandem SST method encrypts with TLS: \
             use encrypt=4 with tca/tcert/tkey, or leave encrypt out to use the group's certificates"
        ),
        Some("2") | Some("3") | Some("4") | None => {}
        Some(other) => bail!("[sst] encrypt={other}: expected 0 to 4"),
    }
    if let (Some(cert), Some(key)) = (sst_get("tcert", "ssl-cert"), sst_get("tkey", "ssl-key")) {
        let ca = sst_get("tca", "ssl-ca").unwrap_or_else(|| cert.clone());
        let tls =
            TlsSource { cert: cert.into(), key: key.into(), ca: ca.into(), ciphers: String::new(), from: "[sst]" };
        return Ok((Some(tls), false));
    }
    if sst.contains_key("encrypt") && !group_tls {
        bail!("[sst] encrypt is set, but neither tcert/tkey in [sst] nor socket.ssl_cert/socket.ssl_key in wsrep_provider_options name a certificate");
    }
    if !group_tls {
        return Ok((None, false));
    }
    let (Some(cert), Some(key)) = (group_get("socket.ssl_cert"), group_get("socket.ssl_key")) else {
        bail!("socket.ssl is on, but socket.ssl_cert or socket.ssl_key is missing from wsrep_provider_options");
    };
    let ca = group_get("socket.ssl_ca").unwrap_or(cert);
    let tls = TlsSource {
        cert: cert.into(),
        key: key.into(),
        ca: ca.into(),
        ciphers: group_get("socket.ssl_cipher").unwrap_or("").to_string(),
        from: "wsrep_provider_options",
    };
    Ok((Some(tls), false))
}

/// `my_print_defaults` for `groups`, from the option files the server
/// gave the script. Without option files there is nothing to read.
fn print_defaults(args: &SstArgs, groups: &[&str]) -> Result<BTreeMap<String, String>> {
    if args.defaults.is_empty() {
        return Ok(BTreeMap::new());
    }
    crate::option_files::print_defaults(&args.defaults, groups).context("reading the [sst] options")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sst(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_without_any_configuration() {
        let s = Settings::from_parts(&sst(&[]), "base_port=4567").unwrap();
        assert!((2..=4).contains(&s.streams));
        assert_eq!((s.timeout, s.idle_timeout), (Duration::from_secs(300), Duration::from_secs(120)));
        assert_eq!((s.tls, s.rlimit), (None, None));
        assert!(!s.plaintext_by_choice);
    }

    #[test]
    fn an_encrypted_group_gets_an_encrypted_transfer_with_its_certificates() {
        let opts = "base_port=4567; socket.ssl=YES; socket.ssl_cert=/c/n1.pem; socket.ssl_key=/c/n1.key; socket.ssl_ca=/c/ca.pem";
        let tls = Settings::from_parts(&sst(&[]), opts).unwrap().tls.unwrap();
        assert_eq!(
            (tls.cert.to_str(), tls.key.to_str(), tls.ca.to_str()),
            (Some("/c/n1.pem"), Some("/c/n1.key"), Some("/c/ca.pem"))
        );
        assert_eq!(tls.from, "wsrep_provider_options");
        let opted_out = Settings::from_parts(&sst(&[("encrypt", "0")]), opts).unwrap();
        assert!(opted_out.tls.is_none() && opted_out.plaintext_by_choice);
        let err = Settings::from_parts(&sst(&[]), "socket.ssl=YES").unwrap_err().to_string();
        assert!(err.contains("socket.ssl_cert"), "{err}");
    }

    #[test]
    fn sst_certificates_take_precedence_and_bad_values_are_refused() {
        let s = sst(&[("encrypt", "4"), ("tca", "/s/ca"), ("tcert", "/s/c"), ("tkey", "/s/k")]);
        let tls = Settings::from_parts(&s, "socket.ssl_cert=/g/c;socket.ssl_key=/g/k").unwrap().tls.unwrap();
        assert_eq!((tls.cert.to_str(), tls.from), (Some("/s/c"), "[sst]"));
        let bad = |pairs: &[(&str, &str)]| Settings::from_parts(&sst(pairs), "").unwrap_err().to_string();
        assert!(bad(&[("encrypt", "1")]).contains("xbcrypt"));
        assert!(bad(&[("encrypt", "4")]).contains("name a certificate"));
        assert!(bad(&[("streams", "0")]).contains("streams=0"));
        assert!(bad(&[("streams", "many")]).contains("streams=many"));
        assert!(bad(&[("timeout", "-1")]).contains("timeout=-1"));
        assert!(bad(&[("rlimit", "fast")]).contains("rlimit=fast"));
        assert!(bad(&[("compression", "gzip")]).contains("none, lz4 or zstd"));
        assert!(bad(&[("compression", "zstd"), ("compression-level", "22")]).contains("level from 1 to 19"));
        assert!(bad(&[("compression", "lz4"), ("compression-level", "3")]).contains("for compression=zstd"));
        let how = |pairs: &[(&str, &str)]| Settings::from_parts(&sst(pairs), "").unwrap().compression;
        assert_eq!(how(&[]), None);
        assert_eq!(how(&[("compression", "none")]), None);
        assert_eq!(how(&[("compression", "LZ4")]), Some(Compression::Lz4));
        assert_eq!(how(&[("compression", "zstd")]), Some(Compression::Zstd { level: 1 }));
        assert_eq!(how(&[("compression", "zstd"), ("compression-level", "6")]), Some(Compression::Zstd { level: 6 }));
        assert_eq!(Settings::from_parts(&sst(&[("rlimit", "80m")]), "").unwrap().rlimit, Some(80 << 20));
        assert_eq!(Settings::from_parts(&sst(&[("streams", "7")]), "").unwrap().streams, 7);
        let s = Settings::from_parts(&sst(&[("compressor", "zstd -1"), ("tca", "/x")]), "").unwrap();
        assert_eq!(s.ignored, ["compressor=zstd -1"]);
    }

    #[test]
    fn data_outside_the_data_directory_is_refused_by_name() {
        let d = Path::new("/var/lib/mysql");
        let ok = |v: &str| check_layout(d, &[("innodb-log-group-home-dir", v.to_string())]);
        for inside in ["", "./", ".", "/var/lib/mysql", "/var/lib/mysql/", "/var/lib/../lib/mysql"] {
            assert!(ok(inside).is_ok(), "{inside:?} refused");
        }
        for outside in ["/srv/redo", "../redo", "redo"] {
            let err = ok(outside).unwrap_err().to_string();
            assert!(err.contains("innodb_log_group_home_dir=") && err.contains("mariabackup"), "{outside}: {err}");
        }
    }
}
