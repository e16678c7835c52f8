//! The `tandem` command as a library: local clusters for humans and tests.

pub mod cli;
pub mod cluster;
