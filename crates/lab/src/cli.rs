//! The `tandem-lab` command line. `--basedir` and what an error looks like
//! are the `tandem` command's own (`tandem::cli`).

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::process::ExitCode;
use tandem::cli::{exit_code, BasedirArg};

#[derive(Parser, Debug)]
#[command(
    name = "tandem-lab",
    version,
    about = "Tandem's lab: Tandem against Galera under sysbench, and MariaDB's MTR suites with each"
)]
pub struct Cli {
    #[command(flatten)]
    basedir: BasedirArg,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// sysbench on Tandem, Galera and standalone MariaDB side by side; writes docs/benchmarks.md
    Bench(Box<crate::bench::BenchArgs>),
    /// MariaDB's galera MTR suites with Galera and with Tandem; writes docs/compatibility.md
    Mtr(Box<crate::mtr::MtrArgs>),
    /// Tandem and Galera with their nodes in two sites a round trip apart
    /// (the WAN emulator; root); writes docs/benchmarks-wan.md
    Wan(Box<crate::wan::WanArgs>),
}

/// Entry point for `main`: errors become one readable message and exit code 1.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = cli.basedir.apply().and_then(|()| run(cli));
    exit_code(result)
}

pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Bench(args) => crate::bench::run(*args),
        Command::Mtr(args) => crate::mtr::run(*args),
        Command::Wan(args) => crate::wan::run(*args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn bench_and_mtr_take_the_basedir_anywhere() {
        let cli = Cli::try_parse_from(["tandem-lab", "bench", "--basedir", "/tmp/b", "--quick"]).unwrap();
        assert_eq!(cli.basedir.basedir.as_deref(), Some(std::path::Path::new("/tmp/b")));
        assert!(matches!(cli.command, Command::Bench(_)));
        let cli = Cli::try_parse_from(["tandem-lab", "--basedir", "/tmp/b", "mtr", "--no-doc"]).unwrap();
        assert!(cli.basedir.basedir.is_some() && matches!(cli.command, Command::Mtr(_)));
    }

    #[test]
    fn the_shipped_commands_are_not_here() {
        assert!(Cli::try_parse_from(["tandem-lab", "cluster", "status"]).is_err());
    }
}
