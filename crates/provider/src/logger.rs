//! Forwards the `log` crate to the server's logger callback, so our messages
//! land in the MariaDB error log as `[Note] WSREP: ...` like Galera's.

use std::ffi::CString;
use std::sync::atomic::{AtomicUsize, Ordering};

use wsrep_abi::{wsrep_log_cb_t, WSREP_LOG_DEBUG, WSREP_LOG_ERROR, WSREP_LOG_INFO, WSREP_LOG_WARN};

static CALLBACK: AtomicUsize = AtomicUsize::new(0);

struct ServerLogger;

static LOGGER: ServerLogger = ServerLogger;

impl log::Log for ServerLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) || !record.target().starts_with("tandem") {
            return;
        }
        let level = match record.level() {
            log::Level::Error => WSREP_LOG_ERROR,
            log::Level::Warn => WSREP_LOG_WARN,
            log::Level::Info => WSREP_LOG_INFO,
            _ => WSREP_LOG_DEBUG,
        };
        let text = record.args().to_string().replace('\0', " ");
        let Ok(msg) = CString::new(text) else { return };
        let raw = CALLBACK.load(Ordering::Acquire);
        if raw == 0 {
            eprintln!("WSREP: {}", msg.to_string_lossy());
            return;
        }
        // SAFETY: `raw` was stored from a non-null `wsrep_log_cb_t` in `install`,
        // and the server keeps its logger alive while the provider is loaded.
        let cb: wsrep_log_cb_t = unsafe { std::mem::transmute::<usize, wsrep_log_cb_t>(raw) };
        if let Some(f) = cb {
            // SAFETY: the callback takes a level and a NUL-terminated string.
            unsafe { f(level, msg.as_ptr()) };
        }
    }

    fn flush(&self) {}
}

pub fn install(cb: wsrep_log_cb_t) {
    CALLBACK.store(cb.map_or(0, |f| f as usize), Ordering::Release);
    let _ = log::set_logger(&LOGGER);
    let debug = std::env::var("TANDEM_DEBUG").is_ok_and(|v| v == "1");
    log::set_max_level(if debug { log::LevelFilter::Debug } else { log::LevelFilter::Info });
}
