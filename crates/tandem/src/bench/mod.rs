//! `tandem bench`: sysbench side by side on Tandem, Galera and standalone MariaDB. (stub)

use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {}

pub fn run(_args: BenchArgs) -> Result<()> {
    anyhow::bail!("tandem bench: not implemented yet")
}
