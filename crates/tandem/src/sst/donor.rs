//! The donor: connect every stream first (so a joiner that is not there
//! costs no lock), ask the server for its read lock, copy, release.

use super::args::SstArgs;
use super::conn::{Conn, Security};
use super::files::{self, Binlog, Entry, TABLES_FLUSHED};
use super::pacer::Pacer;
use super::progress::{Reporter, Tally};
use super::settings::Settings;
use super::wire::{self, Compression, Frame, Hello, Kind, Reply, MAX_CHUNK, OLDEST_VERSION, VERSION};
use super::{log_info, tell_server, Rendezvous};
use anyhow::{anyhow, bail, Context, Result};
use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tandem_health::sst_progress::human;
use tandem_health::sst_progress::Role;

/// How long the donor retries a refused first connection.
const CONNECT_WITHIN: Duration = Duration::from_secs(10);

pub fn run(args: &SstArgs, settings: &Settings) -> Result<()> {
    let gtid = args.gtid.clone().expect("checked by the parser");
    let rendezvous = Rendezvous::parse(&args.address)?;
    let security = Security::load(settings.tls.as_ref())?;
    match (rendezvous.tls, security.is_on()) {
        (true, false) => bail!(
            "the joiner expects TLS, but this donor has no certificate configured \
             (socket.ssl_cert/socket.ssl_key in wsrep_provider_options, or tcert/tkey in [sst])"
        ),
        (false, true) => bail!(
            "this donor encrypts state transfers, but the joiner listens in plaintext: \
             configure the same TLS on the joiner (or encrypt=0 in [sst] on both)"
        ),
        _ => {}
    }
    if settings.plaintext_by_choice {
        super::log_warning("the group channel is encrypted, but this state transfer is not ([sst] encrypt=0)");
    }
    // A donor that does not compress speaks the oldest version, which every
    // joiner reads.
    let version = if settings.compression.is_some() { VERSION } else { OLDEST_VERSION };
    let hello = |kind| Hello { version, token: rendezvous.token.clone(), kind };
    if args.bypass {
        let mut conn = open(&security, &rendezvous.host_port, hello(Kind::Bypass), settings.idle_timeout)?;
        let position = format!("{gtid} {}", args.gtid_domain_id);
        Frame::Position { gtid: position, files: 0, bytes: 0 }.write_to(&mut conn)?;
        Frame::End { files: 0, bytes: 0 }.write_to(&mut conn)?;
        expect_ok(&mut conn, "the bypass")?;
        log_info(&format!("Told the joiner its data is current (IST): {gtid}"));
        return tell_server(&format!("done {gtid}"));
    }
    let streams = settings.streams;
    let conns: Vec<Conn> = (0..streams)
        .map(|stream| {
            open(&security, &rendezvous.host_port, hello(Kind::Data { stream, streams }), settings.idle_timeout)
        })
        .collect::<Result<_>>()?;
    let position = lock_tables(args, settings.timeout)?;
    if let Some(rate) = settings.rlimit {
        log_info(&format!("Sending at most {}/s ([sst] rlimit)", human(rate)));
    }
    let sent = send_all(args, conns, &position, &Arc::new(Pacer::new(settings.rlimit)), settings.compression);
    // Whatever happened, the server's writes may go on: the lock is ours to
    // give back (the server would take it back at our exit, too).
    let _ = std::fs::remove_file(args.datadir.join(TABLES_FLUSHED));
    tell_server("continue")?;
    let (count, bytes, wire_bytes, took) = sent?;
    let packed = match settings.compression {
        Some(how) => format!(", {} to {:.0}%", how.name(), wire_bytes as f64 * 100.0 / bytes.max(1) as f64),
        None => String::new(),
    };
    log_info(&format!(
        "Sent {count} files, {} in {:.2} s over {streams} streams{}{packed} ({:.0} MB/s): {position}",
        human(bytes),
        took.as_secs_f64(),
        if security.is_on() { ", TLS" } else { "" },
        bytes as f64 / 1e6 / took.as_secs_f64().max(1e-3)
    ));
    tell_server(&format!("done {gtid}"))
}

fn open(security: &Security, addr: &str, hello: Hello, idle: Duration) -> Result<Conn> {
    let mut conn = security.connect(addr, CONNECT_WITHIN)?;
    conn.set_timeout(idle)?;
    hello.write_to(&mut conn)?;
    conn.flush()?;
    expect_ok(&mut conn, "the connection")?;
    Ok(conn)
}

fn expect_ok(conn: &mut Conn, what: &str) -> Result<()> {
    match Reply::read_from(conn).with_context(|| format!("waiting for the joiner to accept {what}"))? {
        Reply::Ok => Ok(()),
        Reply::Refused(why) => bail!("the joiner refused {what}: {why}"),
    }
}

/// Asks the server for `FLUSH TABLES WITH READ LOCK` and waits until it
/// holds: the server then writes the position the data is at into
/// `tables_flushed` (or `sst_error` if it could not lock).
fn lock_tables(args: &SstArgs, timeout: Duration) -> Result<String> {
    let flushed = args.datadir.join(TABLES_FLUSHED);
    let error = args.datadir.join("sst_error");
    let _ = std::fs::remove_file(&flushed);
    tell_server("flush tables")?;
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(text) = std::fs::read_to_string(&flushed) {
            if text.contains(':') {
                return Ok(text.trim().to_string());
            }
        }
        if error.exists() {
            bail!("the server could not take FLUSH TABLES WITH READ LOCK ({} exists)", error.display());
        }
        if Instant::now() >= deadline {
            bail!("the server did not take its read lock within {} s ([sst] timeout)", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One thread per stream; stream 0 also carries the position, the totals
/// and the directories. Returns files, bytes, the bytes on the wire and the
/// time the copy took.
fn send_all(
    args: &SstArgs,
    conns: Vec<Conn>,
    position: &str,
    pacer: &Arc<Pacer>,
    compression: Option<Compression>,
) -> Result<(u64, u64, u64, Duration)> {
    let started = Instant::now();
    let binlog = Binlog { base: args.binlog.clone(), index: args.binlog_index.clone() };
    let inventory = files::inventory(&args.datadir, &binlog)?;
    let plan = files::balance(&inventory.files, conns.len());
    let total = inventory.bytes();
    let tally = Arc::new(Tally::with_totals(inventory.files.len() as u64, total));
    if args.progress {
        tell_server(&format!("total {total}"))?;
    }
    let head = Frame::Position { gtid: position.to_string(), files: inventory.files.len() as u64, bytes: total };
    let workers: Vec<_> = conns
        .into_iter()
        .zip(plan)
        .enumerate()
        .map(|(i, (conn, files))| {
            let mut first: Vec<Frame> = Vec::new();
            if i == 0 {
                first.push(head.clone());
                first.extend(inventory.dirs.iter().map(|d| Frame::Dir { path: d.path.clone(), mode: d.mode }));
            }
            let (datadir, tally, pacer) = (args.datadir.clone(), tally.clone(), pacer.clone());
            std::thread::spawn(move || send_stream(conn, &datadir, first, &files, &tally, &pacer, compression))
        })
        .collect();
    // The donor's provider shows the transfer too, beside the joiner's.
    let mut reporter = Reporter::start(Role::Donor, &args.datadir, &tally);
    while !workers.iter().all(|w| w.is_finished()) {
        if reporter.tick(&tally, "Sent") && args.progress {
            tell_server(&format!("complete {}", tally.bytes.load(Ordering::Relaxed)))?;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(reporter);
    for w in workers {
        w.join().map_err(|_| anyhow!("a sending thread panicked"))??;
    }
    if args.progress {
        tell_server(&format!("complete {total}"))?;
    }
    let wire_bytes = tally.wire_bytes.load(Ordering::Relaxed);
    Ok((inventory.files.len() as u64, total, wire_bytes, started.elapsed()))
}

pub(super) fn send_stream(
    conn: Conn,
    datadir: &Path,
    first: Vec<Frame>,
    files: &[Entry],
    tally: &Tally,
    pacer: &Pacer,
    compression: Option<Compression>,
) -> Result<()> {
    let mut w = BufWriter::with_capacity(256 << 10, conn);
    for frame in first {
        frame.write_to(&mut w)?;
    }
    let mut buf = vec![0u8; MAX_CHUNK];
    let mut scratch = Vec::new();
    let mut bytes = 0;
    for f in files {
        let path = datadir.join(&f.path);
        let mut file = std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        Frame::File { path: f.path.clone(), mode: f.mode, size: f.size }.write_to(&mut w)?;
        let mut offset = 0u64;
        while offset < f.size {
            let want = (f.size - offset).min(MAX_CHUNK as u64) as usize;
            let n = read_full(&mut file, &mut buf[..want]).with_context(|| format!("reading {}", path.display()))?;
            if n == 0 {
                bail!("{} shrank to {offset} bytes during the transfer (it was {})", path.display(), f.size);
            }
            // The cap is on what the link carries: compressed bytes.
            let data = &buf[..n];
            let wire_bytes = match compression {
                Some(how) if wire::compress(data, how, &mut scratch)? => {
                    pacer.pace(scratch.len() as u64);
                    wire::write_compressed_chunk(&mut w, offset, data, how, &scratch)
                        .context("sending to the joiner")?;
                    scratch.len()
                }
                _ => {
                    pacer.pace(n as u64);
                    wire::write_chunk(&mut w, offset, data).context("sending to the joiner")?;
                    n
                }
            };
            tally.wire_bytes.fetch_add(wire_bytes as u64, Ordering::Relaxed);
            offset += n as u64;
            tally.add_bytes(n as u64);
        }
        Frame::EndOfFile.write_to(&mut w)?;
        tally.add_file();
        bytes += f.size;
    }
    Frame::End { files: files.len() as u64, bytes }.write_to(&mut w)?;
    w.flush().context("sending to the joiner")?;
    let mut conn = w.into_inner().map_err(|e| anyhow!("sending to the joiner: {}", e.error()))?;
    expect_ok(&mut conn, "a stream")
}

fn read_full(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}
