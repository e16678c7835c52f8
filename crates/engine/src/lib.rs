//! Tandem's engine: Galera semantics on top of a totally ordered group channel.
//!
//! Pure Rust, no FFI, no sockets: the group arrives through `tandem_group`'s
//! traits and the database server through [`app::Application`], so every
//! decision here can be driven deterministically by tests.

pub mod app;
pub mod certification;
pub mod client;
pub mod config;
pub mod dispatch;
pub mod group_state;
pub mod local_group;
pub mod message;
pub mod monitor;
pub mod node;
pub mod options;
pub mod queue;
pub mod saved_state;
pub mod stats;
pub mod status;
pub mod types;
pub mod view;
pub mod waiter;
pub mod writeset;
