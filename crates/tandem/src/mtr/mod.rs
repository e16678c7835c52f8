//! `tandem mtr`: MariaDB's galera MTR suites against Galera and Tandem. (stub)

use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct MtrArgs {}

pub fn run(_args: MtrArgs) -> Result<()> {
    anyhow::bail!("tandem mtr: not implemented yet")
}
