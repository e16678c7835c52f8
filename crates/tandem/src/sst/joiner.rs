//! The joiner: listen, say `ready`, take the donor's connections, receive
//! every stream into the staging directory, then swap the data in and
//! report the position. Nothing of the old data directory is touched until
//! the last stream has been received and checked.

use super::args::SstArgs;
use super::conn::{self, Conn, Security};
use super::files::{self, STAGING};
use super::progress::{Reporter, Tally};
use super::settings::Settings;
use super::wire::{Frame, Hello, Kind, Reply};
use super::{log_info, tell_server, Rendezvous};
use anyhow::{anyhow, bail, Context, Result};
use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tandem_health::sst_progress::human;
use tandem_health::sst_progress::Role;

pub fn run(args: &SstArgs, settings: &Settings) -> Result<()> {
    let security = Security::load(settings.tls.as_ref())?;
    if settings.plaintext_by_choice {
        super::log_warning("the group channel is encrypted, but this state transfer is not ([sst] encrypt=0)");
    }
    let host_port = super::with_port(&args.address);
    let listener = conn::listen(&host_port)?;
    listener.set_nonblocking(true)?;
    let rendezvous = Rendezvous { host_port, token: super::fresh_token()?, tls: security.is_on() };
    let mut joiner = Joiner { args, settings, security, listener, token: rendezvous.token.clone() };
    tell_server(&format!("ready {}", rendezvous.text()))?;
    // From here until the position (or the error), the provider's /metrics
    // and health check show the transfer.
    let tally = Arc::new(Tally::default());
    let mut reporter = Reporter::start(Role::Joiner, &args.datadir, &tally);
    log_info(&format!(
        "Waiting for the donor on {} ({}, up to {} s)",
        rendezvous.host_port,
        if rendezvous.tls { "TLS" } else { "plaintext" },
        settings.timeout.as_secs()
    ));
    let (first, hello) = joiner.next_donor_connection(settings.timeout)?;
    let position = match hello.kind {
        Kind::Bypass => joiner.bypass(first)?,
        Kind::Data { streams, .. } => joiner.full_transfer(first, streams, &tally, &mut reporter)?,
    };
    tell_server(&position)
}

struct Joiner<'a> {
    args: &'a SstArgs,
    settings: &'a Settings,
    security: Security,
    listener: TcpListener,
    token: String,
}

/// What one data stream delivered.
pub(super) struct Received {
    pub position: Option<(String, u64, u64)>,
    pub files: u64,
    pub bytes: u64,
}

impl Joiner<'_> {
    /// The next connection that presents our token, within `wait`. Strays
    /// (another protocol, a stale donor) are refused and logged; the wait
    /// goes on. The server that started us going away ends it too.
    fn next_donor_connection(&mut self, wait: Duration) -> Result<(Conn, Hello)> {
        let deadline = Instant::now() + wait;
        loop {
            self.check_parent()?;
            match self.listener.accept() {
                Ok((tcp, peer)) => {
                    tcp.set_nonblocking(false)?;
                    match self.greet(tcp) {
                        Ok(pair) => return Ok(pair),
                        Err(e) => super::log_warning(&format!("Refused a connection from {peer}: {e:#}")),
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        bail!(
                            "no donor connected within {} s ([sst] timeout); the state transfer is abandoned \
                             and this node's data is unchanged",
                            wait.as_secs()
                        );
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(e).context("accepting the donor's connection"),
            }
        }
    }

    fn greet(&self, tcp: std::net::TcpStream) -> Result<(Conn, Hello)> {
        let mut conn = self.security.accept(tcp)?;
        conn.set_timeout(self.settings.idle_timeout)?;
        let hello = Hello::read_from(&mut conn)?;
        if hello.token != self.token {
            let _ = Reply::Refused("wrong token: not the transfer this joiner asked for".into()).write_to(&mut conn);
            bail!("a donor with another transfer's token");
        }
        Reply::Ok.write_to(&mut conn)?;
        Ok((conn, hello))
    }

    fn check_parent(&self) -> Result<()> {
        match self.args.parent {
            Some(pid) if !crate::cluster::process::is_alive(pid) => {
                bail!("the server (pid {pid}) that asked for this state transfer is gone")
            }
            _ => Ok(()),
        }
    }

    /// The donor's group already covers us (IST): no data, only the position.
    fn bypass(&self, conn: Conn) -> Result<String> {
        let mut r = BufReader::new(conn);
        let Frame::Position { gtid, .. } = Frame::read_from(&mut r)? else { bail!("the donor sent no position") };
        let Frame::End { .. } = Frame::read_from(&mut r)? else { bail!("the donor did not end the bypass") };
        Reply::Ok.write_to(r.get_mut())?;
        log_info(&format!("The donor says this node's data is current (IST follows): {gtid}"));
        Ok(gtid)
    }

    fn full_transfer(
        &mut self,
        first: Conn,
        streams: u16,
        tally: &Arc<Tally>,
        reporter: &mut Reporter,
    ) -> Result<String> {
        let started = Instant::now();
        let staging = self.args.datadir.join(STAGING);
        remove_staging(&staging)?;
        std::fs::create_dir_all(&staging).with_context(|| format!("creating {}", staging.display()))?;
        let result = self.receive_all(first, streams, &staging, tally, reporter);
        let (position, files, bytes) = match result {
            Ok(r) => r,
            Err(e) => {
                let _ = remove_staging(&staging);
                return Err(e.context("the state transfer failed; this node's data is unchanged"));
            }
        };
        let received = started.elapsed();
        install(&self.args.datadir, &staging)?;
        log_info(&format!(
            "Received {files} files, {} in {:.2} s over {streams} streams{} ({:.0} MB/s), installed in {:.2} s: {position}",
            human(bytes),
            received.as_secs_f64(),
            if self.security.is_on() { ", TLS" } else { "" },
            bytes as f64 / 1e6 / received.as_secs_f64().max(1e-3),
            (started.elapsed() - received).as_secs_f64()
        ));
        Ok(position)
    }

    fn receive_all(
        &mut self,
        first: Conn,
        streams: u16,
        staging: &Path,
        tally: &Arc<Tally>,
        reporter: &mut Reporter,
    ) -> Result<(String, u64, u64)> {
        let mut workers: Vec<JoinHandle<Result<Received>>> = Vec::new();
        let spawn = |conn: Conn, workers: &mut Vec<JoinHandle<Result<Received>>>| {
            let (staging, tally) = (staging.to_path_buf(), tally.clone());
            workers.push(std::thread::spawn(move || receive_stream(conn, &staging, &tally)));
        };
        spawn(first, &mut workers);
        let mut seen = 1;
        while seen < streams {
            let (conn, hello) = self.next_donor_connection(self.settings.idle_timeout)?;
            match hello.kind {
                Kind::Data { streams: n, .. } if n == streams => spawn(conn, &mut workers),
                other => bail!("the donor opened a {other:?} connection in a transfer of {streams} streams"),
            }
            seen += 1;
        }
        self.wait_for(&workers, tally, reporter)?;
        let mut position = None;
        let (mut files, mut bytes) = (0, 0);
        for w in workers {
            let r = w.join().map_err(|_| anyhow!("a receiving thread panicked"))??;
            position = position.or(r.position);
            files += r.files;
            bytes += r.bytes;
        }
        let Some((gtid, want_files, want_bytes)) = position else { bail!("the donor sent no position") };
        if (files, bytes) != (want_files, want_bytes) {
            bail!("received {files} files and {bytes} bytes, the donor announced {want_files} and {want_bytes}");
        }
        Ok((gtid, files, bytes))
    }

    /// Waits for every stream, logging progress; the first failure ends the
    /// wait (the others end on their own when the donor goes).
    fn wait_for(&self, workers: &[JoinHandle<Result<Received>>], tally: &Tally, reporter: &mut Reporter) -> Result<()> {
        // A stream that fails ends the donor (its write breaks), and with it
        // the other streams: waiting for all of them is bounded.
        while !workers.iter().all(|w| w.is_finished()) {
            self.check_parent()?;
            reporter.tick(tally, "Received");
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

/// Receives one stream into `staging`: whole files in order, each chunk at
/// the offset the file has reached, each file exactly its announced size.
pub(super) fn receive_stream(conn: Conn, staging: &Path, tally: &Tally) -> Result<Received> {
    let mut r = BufReader::with_capacity(super::wire::MAX_CHUNK + 64, conn);
    let mut out = Received { position: None, files: 0, bytes: 0 };
    let mut current: Option<(PathBuf, std::fs::File, u64, u64, u32)> = None;
    loop {
        let frame = Frame::read_from(&mut r).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                anyhow!("the donor closed the connection mid-transfer (the donor's error log says why)")
            }
            _ => anyhow!("reading from the donor: {e}"),
        })?;
        match frame {
            Frame::Position { gtid, files, bytes } => {
                tally.announce(files, bytes);
                out.position = Some((gtid, files, bytes));
            }
            Frame::Dir { path, mode } => {
                let dir = staging.join(files::checked_path(&path).map_err(|e| anyhow!(e))?);
                std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
                set_mode(&dir, mode)?;
            }
            Frame::File { path, mode, size } => {
                if current.is_some() {
                    bail!("the donor started {path} before ending the previous file");
                }
                let target = staging.join(files::checked_path(&path).map_err(|e| anyhow!(e))?);
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&target)
                    .with_context(|| format!("creating {} (sent twice?)", target.display()))?;
                current = Some((target, file, size, 0, mode));
            }
            Frame::Chunk { offset, data } => {
                let Some((target, file, size, done, _)) = current.as_mut() else { bail!("a chunk outside a file") };
                if offset != *done || *done + data.len() as u64 > *size {
                    bail!(
                        "{}: a chunk at offset {offset} (+{}) where {done} of {size} bytes are written",
                        target.display(),
                        data.len()
                    );
                }
                file.write_all(&data).with_context(|| format!("writing {}", target.display()))?;
                let before = *done;
                *done += data.len() as u64;
                start_writeback(file, before, *done);
                tally.add_bytes(data.len() as u64);
            }
            Frame::EndOfFile => {
                let Some((target, _file, size, done, mode)) = current.take() else {
                    bail!("an end of file outside a file")
                };
                if done != size {
                    bail!("{}: {done} of {size} bytes received", target.display());
                }
                set_mode(&target, mode)?;
                tally.add_file();
                out.files += 1;
                out.bytes += size;
            }
            Frame::End { files, bytes } => {
                if current.is_some() || (files, bytes) != (out.files, out.bytes) {
                    bail!(
                        "the donor ended a stream of {files} files / {bytes} bytes; {} / {} arrived",
                        out.files,
                        out.bytes
                    );
                }
                Reply::Ok.write_to(r.get_mut())?;
                return Ok(out);
            }
        }
    }
}

/// Bytes of a file after which its pages are handed to the disk.
const WRITEBACK_EVERY: u64 = 16 << 20;

/// Starts writing the last `WRITEBACK_EVERY` bytes of `file` to disk when
/// `done` crossed a multiple of it, without waiting. Left alone, the kernel
/// keeps a transfer's pages dirty in memory (far below its background
/// threshold on a machine with a large memory) and the one `syncfs` before
/// the swap then writes them all while nothing else happens; begun as they
/// arrive, the disk works while the network does. Only a hint: the `syncfs`
/// is what makes the data durable, so a refusal is ignored.
fn start_writeback(file: &std::fs::File, before: u64, done: u64) {
    if let Some((from, len)) = writeback_range(before, done) {
        // POSIX_FADV_DONTNEED starts writeback of the dirty pages in the
        // range (and drops only the pages that are already clean).
        let _ = rustix::fs::fadvise(file, from, Some(len), rustix::fs::Advice::DontNeed);
    }
}

/// The window to hand to the disk once a file grew from `before` to `done`
/// bytes: every `WRITEBACK_EVERY` block completed by that write, if any
/// (one for chunks up to the block's size).
fn writeback_range(before: u64, done: u64) -> Option<(u64, std::num::NonZeroU64)> {
    let from = before / WRITEBACK_EVERY * WRITEBACK_EVERY;
    let end = done / WRITEBACK_EVERY * WRITEBACK_EVERY;
    Some((from, std::num::NonZeroU64::new(end.saturating_sub(from))?))
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    // The owner keeps read and write: the server must open what it got.
    let mode = (mode & 0o7777) | 0o600 | if path.is_dir() { 0o100 } else { 0 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", path.display()))
}

/// Swaps the received data in: one `syncfs` for everything written (a
/// power loss right after must not leave torn tablespaces behind a reported
/// success), then away with the old data (the node's own state stays), then
/// the staged entries renamed into place.
fn install(datadir: &Path, staging: &Path) -> Result<()> {
    let dir = std::fs::File::open(staging)?;
    rustix::fs::syncfs(&dir).map_err(|e| anyhow!("syncfs on {}: {e}", staging.display()))?;
    for entry in std::fs::read_dir(datadir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if files::is_kept(&name) {
            continue;
        }
        let path = entry.path();
        let gone =
            if entry.file_type()?.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
        gone.with_context(|| format!("removing the old {}", path.display()))?;
    }
    for entry in std::fs::read_dir(staging)? {
        let entry = entry?;
        let target = datadir.join(entry.file_name());
        std::fs::rename(entry.path(), &target).with_context(|| format!("moving {} into place", target.display()))?;
    }
    std::fs::remove_dir(staging)?;
    std::fs::File::open(datadir)?.sync_all()?;
    Ok(())
}

fn remove_staging(staging: &Path) -> Result<()> {
    match std::fs::remove_dir_all(staging) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e).context(format!("removing {}", staging.display())),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_completed_block_is_handed_to_the_disk_once() {
        const M: u64 = 1 << 20;
        assert_eq!(writeback_range(0, M), None);
        assert_eq!(writeback_range(15 * M, 16 * M).map(|(f, l)| (f, l.get())), Some((0, 16 * M)));
        assert_eq!(writeback_range(16 * M, 17 * M), None, "the block was handed over already");
        assert_eq!(writeback_range(31 * M + 5, 33 * M).map(|(f, l)| (f, l.get())), Some((16 * M, 16 * M)));
        // Every block of a file written in chunks, each exactly once.
        let mut handed = Vec::new();
        let (mut done, chunk) = (0, 3 * M + 7);
        while done < 100 * M {
            handed.extend(writeback_range(done, done + chunk).map(|(f, _)| f / WRITEBACK_EVERY));
            done += chunk;
        }
        assert_eq!(handed, (0..done / WRITEBACK_EVERY).collect::<Vec<_>>());
        // A write longer than a block hands over every block it completed.
        assert_eq!(writeback_range(10 * M, 50 * M).map(|(f, l)| (f, l.get())), Some((0, 48 * M)));
    }

    /// The hint changes where the bytes are, never what they are.
    #[test]
    fn a_file_handed_to_the_disk_as_it_grows_reads_back_whole() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.ibd");
        let mut file = std::fs::File::create(&path).unwrap();
        let chunk: Vec<u8> = (0..(1u32 << 20) + 13).map(|i| (i % 251) as u8).collect();
        let mut done = 0u64;
        for _ in 0..40 {
            file.write_all(&chunk).unwrap();
            start_writeback(&file, done, done + chunk.len() as u64);
            done += chunk.len() as u64;
        }
        drop(file);
        let back = std::fs::read(&path).unwrap();
        assert_eq!(back.len() as u64, done);
        assert!(back.chunks(chunk.len()).all(|c| c == chunk.as_slice()));
    }

    #[test]
    fn install_replaces_data_and_keeps_the_nodes_own_files() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        for (name, text) in [("grastate.dat", "g"), ("x.galera.cache", "c"), ("ibdata1", "old"), ("marker", "m")] {
            std::fs::write(data.join(name), text).unwrap();
        }
        std::fs::create_dir(data.join("olddb")).unwrap();
        let staging = data.join(STAGING);
        std::fs::create_dir_all(staging.join("newdb")).unwrap();
        std::fs::write(staging.join("ibdata1"), "new").unwrap();
        std::fs::write(staging.join("newdb/t.ibd"), "t").unwrap();
        install(data, &staging).unwrap();
        let mut names: Vec<String> =
            std::fs::read_dir(data).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        assert_eq!(names, ["grastate.dat", "ibdata1", "newdb", "x.galera.cache"]);
        assert_eq!(std::fs::read_to_string(data.join("ibdata1")).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(data.join("grastate.dat")).unwrap(), "g");
    }
}
