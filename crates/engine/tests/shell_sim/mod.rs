//! The engine's production shell on the production group, over a simulated
//! network: see `shell_simulation.rs` for what it runs and why it is not
//! replayed from a seed.
//!
//! Modules: `world` (the turmoil hosts and the faults between them),
//! `node` (a node, its crash and what it leaves), `writer` (the clients),
//! `reader` (causal readers),
//! `checks` (what every run must end with).

pub mod checks;
pub mod node;
pub mod reader;
pub mod world;
pub mod writer;

use std::time::Instant;

/// `TANDEM_TEST_LOG=info` (or debug): what the nodes and members log, on
/// stderr, with the wall time.
pub fn init_logging() {
    struct Stderr(Instant);
    impl log::Log for Stderr {
        fn enabled(&self, _: &log::Metadata) -> bool {
            true
        }
        fn log(&self, r: &log::Record) {
            eprintln!("{:>9.3}s {:5} {}", self.0.elapsed().as_secs_f64(), r.level(), r.args());
        }
        fn flush(&self) {}
    }
    static LOGGER: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    LOGGER.get_or_init(|| {
        let level = std::env::var("TANDEM_TEST_LOG").ok().and_then(|l| l.parse::<log::LevelFilter>().ok());
        if let Some(level) = level {
            let _ = log::set_logger(Box::leak(Box::new(Stderr(Instant::now()))));
            log::set_max_level(level);
        }
    });
}
