//! Tandem's lab, beside the shipped `tandem` command: the side-by-side
//! benchmark against Galera and a standalone MariaDB (`tandem-lab bench`),
//! and MariaDB's galera MTR suites with each provider (`tandem-lab mtr`).
//! It drives clusters through the `tandem` library; nothing shipped uses it.

pub mod bench;
pub mod cli;
pub mod mtr;
pub mod progress;
pub mod wan;
