//! The `tandem` command as a library: local clusters for humans and tests,
//! one node of a real cluster, real clusters by address, the arbitrator and
//! the SST method. The lab (`crates/lab`, the `tandem-lab` command) is built
//! on it; nothing here uses the lab.

pub mod arbitrator;
pub mod basedir;
pub mod cli;
pub mod cluster;
pub mod option_files;
pub mod remote;
pub mod sst;
pub mod time_fmt;
