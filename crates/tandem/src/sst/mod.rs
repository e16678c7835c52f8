//! `tandem sst`: the `tandem` state transfer method (`wsrep_sst_method=tandem`;
//! the server runs `wsrep_sst_tandem`, a two-line script that execs this).
//!
//! The donor's server takes `FLUSH TABLES WITH READ LOCK` (writes wait,
//! reads go on), and the donor copies its data directory over several TCP
//! connections at once, files spread by size, each chunk checksummed; then
//! the lock goes. This is the consistency of MariaDB's rsync method, without
//! rsync's daemon, its one stream per schema directory, or mariabackup's
//! fixed sleep and redo preparation. The joiner receives into a staging
//! directory and replaces its old data only once every stream has arrived
//! whole: a broken transfer leaves the joiner's old data as it was, and the
//! joiner exits with an error before it reports a position, so its server
//! aborts instead of joining half-copied.
//!
//! The contract with mariadbd is in `shared/reference/sst-contract.md`: the
//! joiner prints `ready <address>` once it listens and `<uuid>:<seqno>
//! <domain>` at the end; the donor prints `flush tables`, `continue` and
//! `done <uuid>:<seqno>`. Both log to stderr (the server's error log) in
//! the stock scripts' `WSREP_SST: [LEVEL]` style.

pub mod args;
mod conn;
mod donor;
pub mod files;
mod joiner;
mod pacer;
mod progress;
pub mod settings;
pub mod wire;

use anyhow::{anyhow, bail, Result};
use std::io::Write;

#[derive(clap::Args, Debug)]
#[command(
    disable_help_flag = true,
    about = "The tandem SST method, run by mariadbd as wsrep_sst_tandem (its argv is the server's SST contract)"
)]
pub struct SstCommand {
    /// The server's arguments, as it gives them to any SST method.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    argv: Vec<String>,
}

/// Runs the method; the exit status is the errno the server passes on to
/// the joiner when the donor fails ("State transfer ... failed: ..."):
/// EINVAL for a command line or configuration it cannot use, EPIPE for a
/// transfer that broke, as the stock scripts use them.
pub fn run(cmd: SstCommand) -> u8 {
    const EINVAL: u8 = 22;
    const EPIPE: u8 = 32;
    let setup = args::SstArgs::parse(&cmd.argv).and_then(|a| Ok((settings::Settings::load(&a)?, a)));
    let (settings, args) = match setup {
        Ok(pair) => pair,
        Err(e) => {
            log_error(&format!("{e:#}"));
            return EINVAL;
        }
    };
    for item in &settings.ignored {
        log_info(&format!(
            "[sst] {item} is mariabackup's setting; the tandem method does not use it (its own: compression=lz4|zstd)"
        ));
    }
    let result = match args.role {
        args::Role::Joiner => joiner::run(&args, &settings),
        args::Role::Donor => donor::run(&args, &settings),
    };
    // The server shows the script's stderr in its error log: that is where
    // a DBA looks, so the reason goes there, in full.
    match result {
        Ok(()) => 0,
        Err(e) => {
            log_error(&format!("{e:#}"));
            EPIPE
        }
    }
}

fn stamp() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    crate::time_fmt::utc(now.as_secs())
}

pub(crate) fn log_info(msg: &str) {
    eprintln!("WSREP_SST: [INFO] {msg} ({})", stamp());
}

pub(crate) fn log_warning(msg: &str) {
    eprintln!("WSREP_SST: [WARNING] {msg} ({})", stamp());
}

fn log_error(msg: &str) {
    eprintln!("WSREP_SST: [ERROR] {msg} ({})", stamp());
}

/// One line to the server (stdout is the pipe it reads), flushed at once:
/// the server acts on each line as it arrives.
pub(crate) fn tell_server(line: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush().map_err(|e| anyhow!("writing '{line}' to the server: {e}"))
}

/// What the joiner announces and the donor dials:
/// `host:port/tandem/<token>[/tls]`. The server passes it through
/// unchanged, and allows only `[A-Za-z0-9._-:[]/]` in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendezvous {
    pub host_port: String,
    pub token: String,
    pub tls: bool,
}

/// The port the stock scripts use when `wsrep_sst_receive_address` has none.
pub const DEFAULT_PORT: u16 = 4444;

impl Rendezvous {
    pub fn text(&self) -> String {
        format!("{}/tandem/{}{}", self.host_port, self.token, if self.tls { "/tls" } else { "" })
    }

    pub fn parse(text: &str) -> Result<Rendezvous> {
        let mut parts = text.split('/');
        let host_port = parts.next().unwrap_or_default().to_string();
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("tandem"), Some(token), tls, None) if !token.is_empty() && matches!(tls, None | Some("tls")) => {
                Ok(Rendezvous { host_port, token: token.to_string(), tls: tls.is_some() })
            }
            _ => bail!(
                "the joiner's address '{text}' is not a tandem SST address (host:port/tandem/token): \
                 the joiner runs another SST method"
            ),
        }
    }
}

/// `host` or `host:port` (IPv6 in brackets) with the default port added.
pub fn with_port(address: &str) -> String {
    let has_port = match address.rfind(']') {
        Some(end) => address[end..].contains(':'),
        None => address.contains(':'),
    };
    if has_port {
        address.to_string()
    } else {
        format!("{address}:{DEFAULT_PORT}")
    }
}

/// A token no earlier or stray donor can know.
fn fresh_token() -> Result<String> {
    use std::io::Read;
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendezvous_round_trips_and_other_methods_are_named() {
        for tls in [false, true] {
            let r = Rendezvous { host_port: "127.0.0.1:4444".into(), token: "00ff".into(), tls };
            assert_eq!(Rendezvous::parse(&r.text()).unwrap(), r);
            assert!(r.text().bytes().all(|b| b.is_ascii_alphanumeric() || b"._-:[]/".contains(&b)));
        }
        let r = Rendezvous::parse("[::1]:5/tandem/ab").unwrap();
        assert_eq!(r.host_port, "[::1]:5");
        for other in ["127.0.0.1:4444/xtrabackup_sst//1", "127.0.0.1:4444/rsync_sst", "h:1/tandem/", "h:1/tandem/a/b"] {
            let err = Rendezvous::parse(other).unwrap_err().to_string();
            assert!(err.contains("another SST method"), "{other}: {err}");
        }
    }

    #[test]
    fn the_default_port_is_added_only_when_missing() {
        assert_eq!(with_port("10.0.0.2"), "10.0.0.2:4444");
        assert_eq!(with_port("10.0.0.2:25002"), "10.0.0.2:25002");
        assert_eq!(with_port("[::1]"), "[::1]:4444");
        assert_eq!(with_port("[::1]:7"), "[::1]:7");
    }

    #[test]
    fn tokens_differ() {
        let (a, b) = (fresh_token().unwrap(), fresh_token().unwrap());
        assert_eq!(a.len(), 16);
        assert_ne!(a, b);
    }
}

/// A donor's stream and a joiner's receiver, in one process over loopback.
#[cfg(test)]
mod stream_tests {
    use super::conn::Conn;
    use super::files::{self, Binlog};
    use super::pacer::Pacer;
    use super::progress::Tally;
    use super::wire::{Frame, MAX_CHUNK};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::Ordering::Relaxed;

    fn pair() -> (Conn, Conn) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let donor = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (joiner, _) = listener.accept().unwrap();
        (Conn::Plain(donor), Conn::Plain(joiner))
    }

    fn write(path: &std::path::Path, bytes: &[u8]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    /// Plain and compressed, every byte arrives, and both sides count it.
    #[test]
    fn a_data_directory_arrives_byte_for_byte() {
        use super::wire::Compression;
        for how in [None, Some(Compression::Lz4), Some(Compression::Zstd { level: 3 })] {
            let (src, dst) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
            // Compressible and not: runs of a pattern, then noise.
            let mut x = 88172645463325252u64;
            let big: Vec<u8> = (0..(MAX_CHUNK * 2 + 12345) as u32)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if (i as usize) < MAX_CHUNK {
                        (i % 251) as u8
                    } else {
                        x as u8
                    }
                })
                .collect();
            write(&src.path().join("ibdata1"), &big);
            write(&src.path().join("db/t.ibd"), b"table");
            write(&src.path().join("db/empty.frm"), b"");
            std::fs::create_dir_all(src.path().join("emptydb")).unwrap();
            write(&src.path().join("grastate.dat"), b"the donor's own");
            let inv = files::inventory(src.path(), &Binlog::default()).unwrap();
            let mut first = vec![Frame::Position { gtid: "u:7 0".into(), files: 3, bytes: inv.bytes() }];
            first.extend(inv.dirs.iter().map(|d| Frame::Dir { path: d.path.clone(), mode: d.mode }));
            let (donor, joiner) = pair();
            let staging = dst.path().to_path_buf();
            let received = std::sync::Arc::new(Tally::default());
            let tally = received.clone();
            let receiver = std::thread::spawn(move || super::joiner::receive_stream(joiner, &staging, &tally));
            let sent = Tally::with_totals(3, inv.bytes());
            super::donor::send_stream(donor, src.path(), first, &inv.files, &sent, &Pacer::new(None), how).unwrap();
            let got = receiver.join().unwrap().unwrap();
            for t in [&sent, &*received] {
                let counts = [&t.files, &t.bytes, &t.total_files, &t.total_bytes].map(|a| a.load(Relaxed));
                assert_eq!(counts, [3, inv.bytes(), 3, inv.bytes()], "{how:?}: the progress counted on both sides");
            }
            let wire = sent.wire_bytes.load(Relaxed);
            match how {
                None => assert_eq!(wire, inv.bytes()),
                // The patterned megabyte shrinks; the noise goes plain.
                Some(_) => assert!(wire < inv.bytes() - MAX_CHUNK as u64 / 2, "{how:?}: {wire} on the wire"),
            }
            assert_eq!((got.files, got.bytes), (3, big.len() as u64 + 5));
            assert_eq!(got.position, Some(("u:7 0".to_string(), 3, inv.bytes())));
            assert!(std::fs::read(dst.path().join("ibdata1")).unwrap() == big, "{how:?}: ibdata1 differs");
            assert_eq!(std::fs::read(dst.path().join("db/t.ibd")).unwrap(), b"table");
            assert_eq!(std::fs::read(dst.path().join("db/empty.frm")).unwrap(), b"");
            assert!(dst.path().join("emptydb").is_dir());
            assert!(!dst.path().join("grastate.dat").exists(), "the donor's own state is not sent");
        }
    }

    #[test]
    fn a_donor_that_goes_away_mid_file_is_an_error_not_a_short_file() {
        let dst = tempfile::tempdir().unwrap();
        let (mut donor, joiner) = pair();
        Frame::File { path: "ibdata1".into(), mode: 0o660, size: 10_000 }.write_to(&mut donor).unwrap();
        Frame::Chunk { offset: 0, data: vec![1; 4000] }.write_to(&mut donor).unwrap();
        drop(donor);
        let err = super::joiner::receive_stream(joiner, dst.path(), &Tally::default()).err().unwrap();
        assert!(format!("{err:#}").contains("closed the connection mid-transfer"), "{err:#}");
    }

    #[test]
    fn a_donor_cannot_write_outside_the_staging_directory_or_skip_bytes() {
        for frames in [
            vec![Frame::Dir { path: "../escape".into(), mode: 0o700 }],
            vec![Frame::File { path: "/etc/x".into(), mode: 0o600, size: 1 }],
            vec![Frame::File { path: "x.galera.cache".into(), mode: 0o600, size: 1 }],
            vec![Frame::File { path: "f".into(), mode: 0o600, size: 10 }, Frame::Chunk { offset: 5, data: vec![0; 5] }],
            vec![
                Frame::File { path: "f".into(), mode: 0o600, size: 10 },
                Frame::Chunk { offset: 0, data: vec![0; 5] },
                Frame::EndOfFile,
            ],
            vec![Frame::End { files: 1, bytes: 0 }],
        ] {
            let dst = tempfile::tempdir().unwrap();
            let staging = dst.path().join("staging");
            std::fs::create_dir(&staging).unwrap();
            let (mut donor, joiner) = pair();
            for f in &frames {
                f.write_to(&mut donor).unwrap();
            }
            let err = super::joiner::receive_stream(joiner, &staging, &Tally::default()).err();
            assert!(err.is_some(), "{frames:?} accepted");
            assert!(!dst.path().join("escape").exists());
            // Nothing acknowledged: the donor would not report the transfer done.
            let mut reply = [0u8; 1];
            use std::io::Read;
            assert!(!matches!(donor.read(&mut reply), Ok(1) if reply[0] == 0), "{frames:?} acknowledged");
        }
    }
}
