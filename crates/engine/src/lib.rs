//! Tandem's engine: Galera semantics on top of a totally ordered group channel.
//!
//! Pure Rust, no FFI, no sockets: the group arrives through `tandem_group`'s
//! traits and the database server through [`app::Application`], so every
//! decision here can be driven deterministically by tests.

pub mod certification;
pub mod group_state;
pub mod message;
pub mod monitor;
pub mod view;
pub mod types;
pub mod writeset;
