//! The `tandem` command as a library: local clusters for humans and tests,
//! the side-by-side benchmark and the MTR compatibility run.

pub mod arbitrator;
pub mod basedir;
pub mod bench;
pub mod cli;
pub mod cluster;
pub mod mtr;
pub mod option_files;
pub mod progress;
pub mod remote;
pub mod sst;
pub mod time_fmt;
