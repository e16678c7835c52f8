//! The `tandem wan` subcommands: the WAN emulator (delay, jitter, loss and
//! a rate cap between sites, through a TUN device in a router namespace)
//! and the probe that checks a path through it. The `tandem` command only
//! hands them over (with its logger installed); the README builds a layout
//! by hand.

use std::net::SocketAddr;
use std::time::Duration;

use crate::spec::{LinkArg, SiteSpec};
use anyhow::Result;
use clap::{Args, Subcommand};

#[derive(Subcommand, Debug)]
pub enum WanCommand {
    /// Forward packets between sites through a TUN device, each link with
    /// its delay, jitter, loss and rate. Runs until stopped. The namespace
    /// it runs in must route traffic between sites into the device
    /// (policy routing by incoming interface)
    Emulate(EmulateArgs),
    /// Answer UDP probes (run on the far end of a path)
    Echo(EchoArgs),
    /// Measure a path to a `tandem wan echo`: round trips, loss and
    /// reordering, as one line of key=value pairs
    Probe(ProbeArgs),
}

#[derive(Args, Debug)]
pub struct EmulateArgs {
    /// The TUN device to make
    #[arg(long, default_value = "wan0")]
    device: String,
    /// A site: NAME=ADDRESS/PREFIX, the subnet of its nodes (two or more)
    #[arg(long = "site", value_name = "NAME=SUBNET", required = true)]
    sites: Vec<String>,
    /// A link: A-B (both ways) or A>B (one way), then ':' and settings:
    /// rtt=50ms or delay=25ms (one way), jitter=2ms, loss=1% (each way),
    /// rate=100mbit, buffer=200ms (the queue before a capped wire), reorder
    #[arg(long = "link", value_name = "A-B:SETTINGS")]
    links: Vec<String>,
    /// Seeds the loss and jitter draws (the same seed draws the same)
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seconds between the log lines of what each link did (1 or more)
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    report_every: u64,
}

#[derive(Args, Debug)]
pub struct EchoArgs {
    /// The UDP address to answer on
    #[arg(long, default_value = "0.0.0.0:7077")]
    listen: SocketAddr,
}

#[derive(Args, Debug)]
pub struct ProbeArgs {
    /// The echo's UDP address
    #[arg(long)]
    to: SocketAddr,
    /// Datagrams to send (1 or more)
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,
    /// Time between two datagrams (such as 5ms)
    #[arg(long, default_value = "5ms", value_parser = crate::spec::duration)]
    interval: Duration,
    /// Bytes per datagram
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// How long to wait for answers after the last send
    #[arg(long, default_value = "1s", value_parser = crate::spec::duration)]
    linger: Duration,
}

pub fn run(command: WanCommand) -> Result<()> {
    match command {
        WanCommand::Emulate(args) => emulate(args),
        WanCommand::Echo(args) => crate::probe::echo(args.listen),
        WanCommand::Probe(args) => {
            let settings = crate::probe::ProbeSettings {
                to: args.to,
                count: args.count,
                interval: args.interval,
                size: args.size,
                linger: args.linger,
            };
            println!("{}", crate::probe::probe(&settings)?.line());
            Ok(())
        }
    }
}

fn emulate(args: EmulateArgs) -> Result<()> {
    let sites = args.sites.iter().map(|s| SiteSpec::parse(s)).collect::<Result<Vec<_>>>()?;
    let links = args.links.iter().map(|l| LinkArg::parse(l)).collect::<Result<Vec<_>>>()?;
    let topology = crate::topology::Topology::new(sites, &links)?;
    crate::emulate::run(crate::emulate::Settings {
        device: args.device,
        topology,
        seed: args.seed,
        report_every: Duration::from_secs(args.report_every),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: WanCommand,
    }

    fn parse(args: &[&str]) -> Result<WanCommand, clap::Error> {
        Cli::try_parse_from(std::iter::once("wan").chain(args.iter().copied())).map(|c| c.command)
    }

    #[test]
    fn zero_report_interval_and_zero_probes_are_refused() {
        let site = ["emulate", "--site", "a=10.0.1.0/24", "--site", "b=10.0.2.0/24"];
        let err = parse(&[&site[..], &["--report-every", "0"]].concat()).unwrap_err().to_string();
        assert!(err.contains("--report-every") && err.contains("0"), "{err}");
        let Ok(WanCommand::Emulate(args)) = parse(&[&site[..], &["--report-every", "3"]].concat()) else {
            panic!("a 3 s interval is taken")
        };
        assert_eq!(args.report_every, 3);
        let err = parse(&["probe", "--to", "127.0.0.1:7077", "--count", "0"]).unwrap_err().to_string();
        assert!(err.contains("--count"), "{err}");
    }
}
