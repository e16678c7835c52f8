//! Tandem's engine: Galera semantics on top of a totally ordered group channel.
//!
//! Pure Rust, no FFI, no sockets: the group arrives through the traits of
//! `tandem_group_api` (implemented by `tandem_group`) and the database
//! server through [`app::Application`].
//!
//! Deterministic, and driven by the seeded simulation without threads or
//! clocks: the replicated state ([`group_state`], [`certification`]) and the
//! node's own decisions ([`core`], [`admission`], [`retention`]). The shell
//! around them owns threads, locks and I/O: [`node`], [`applier`],
//! [`client`], [`dispatch`], the monitors and queues.

pub mod admission;
pub mod app;
pub mod applier;
pub mod arbitrator;
mod callback;
pub mod certification;
pub mod client;
mod commands;
pub mod config;
mod connection;
pub mod core;
pub mod dispatch;
mod flow;
pub mod flow_control;
mod flow_gate;
pub mod group_state;
mod in_flight;
mod inconsistency;
mod inherited;
pub mod injected;
mod leave;
pub mod local_group;
pub mod local_trx;
pub mod message;
pub mod monitor;
mod named_thread;
pub mod node;
pub mod options;
mod outbox;
mod process_id;
pub mod queue;
mod quiet;
pub mod retention;
pub mod saved_state;
mod send;
mod settings;
pub mod stats;
pub mod status;
mod ticker;
mod transfer_end;
pub mod types;
pub mod view;
pub mod voting;
pub mod waiter;
pub mod writeset;
