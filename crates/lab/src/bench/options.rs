//! What `tandem-lab bench` is asked to run: its command line, and the sizes of
//! a run once `--quick` and the explicit options are applied. The run
//! itself is in `mod.rs`.

use super::plan::{Matrix, Placement, Workload};
use super::rejoin;
use super::runner::DataSet;
use anyhow::{bail, Result};
use std::path::PathBuf;
use tandem::cluster::{self, ProviderKind};

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Smoke size, a few minutes: 2 tables x 10k rows, oltp_write_only and
    /// oltp_point_select, 1 and 8 threads, 5 s runs, rejoins after 2000
    /// write-sets; report under --dir
    #[arg(long)]
    pub(crate) quick: bool,
    /// Nodes per replicated cluster
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=9))]
    pub(crate) nodes: u16,
    /// Comma-separated [default: all four]
    #[arg(long, value_enum, value_delimiter = ',')]
    pub(crate) workloads: Option<Vec<Workload>>,
    /// Client threads per run, comma-separated [default: 1,4,16,64]
    #[arg(long, value_delimiter = ',')]
    pub(crate) threads: Option<Vec<u32>>,
    /// Where the clients connect, comma-separated [default: node1,spread]
    #[arg(long, value_enum, value_delimiter = ',')]
    pub(crate) placements: Option<Vec<Placement>>,
    /// What to measure, comma-separated. `standalone` and `null` (the null
    /// provider, the floor: crates/null-provider) run the node-1 and 1-node
    /// cells only
    #[arg(long, value_enum, value_delimiter = ',', default_value = "tandem,galera,standalone,null")]
    pub(crate) targets: Vec<ProviderKind>,
    /// sysbench tables [default: 8]
    #[arg(long)]
    pub(crate) tables: Option<u32>,
    /// Rows per table [default: 100000]
    #[arg(long)]
    pub(crate) table_size: Option<u32>,
    /// Measured seconds per run [default: 6]
    #[arg(long)]
    pub(crate) duration: Option<u32>,
    /// Seconds per run before measuring starts [default: 2]
    #[arg(long)]
    pub(crate) warmup: Option<u32>,
    /// Runs of every cell on every target; the report takes each target's
    /// median round [default: 3; with --quick: 1]
    #[arg(long)]
    pub(crate) rounds: Option<u32>,
    /// innodb_buffer_pool_size of every server (the data set fits in it)
    #[arg(long, default_value = "512M")]
    pub(crate) buffer_pool: String,
    /// wsrep_slave_threads of every replicated node
    #[arg(long, default_value_t = cluster::DEFAULT_SLAVE_THREADS)]
    pub(crate) slave_threads: usize,
    /// Extra [mysqld] option KEY=VAL for every server; repeatable
    #[arg(long = "extra-option", value_name = "KEY=VAL", value_parser = cluster::config::parse_key_value)]
    pub(crate) extra_options: Vec<(String, String)>,
    /// Tandem library [default: $TANDEM_PROVIDER or target/release/libtandem.so]
    #[arg(long)]
    pub(crate) tandem_path: Option<PathBuf>,
    /// The null provider's library [default: target/release/libtandem_null.so]
    #[arg(long)]
    pub(crate) null_path: Option<PathBuf>,
    /// Galera library [default: /usr/lib/galera/libgalera_smm.so]
    #[arg(long)]
    pub(crate) galera_path: Option<PathBuf>,
    /// Working directory: one cluster per target, sysbench logs
    #[arg(long, default_value = ".tandem/bench")]
    pub(crate) dir: PathBuf,
    /// Markdown report [default: docs/benchmarks.md in the workspace; with --quick: DIR/benchmarks.md]
    #[arg(long)]
    pub(crate) doc: Option<PathBuf>,
    /// JSON results, compared with on the next run [default: the report's path with .json]
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Measure nothing: write the report (--doc) again from the JSON results
    /// of an earlier run, e.g. after the report's layout changed
    #[arg(long, value_name = "RESULTS_JSON")]
    pub(crate) render_from: Option<PathBuf>,
    /// With --render-from: the earlier run its Repeatability section compares with
    #[arg(long, value_name = "RESULTS_JSON", requires = "render_from")]
    pub(crate) compare_with: Option<PathBuf>,
    /// Skip the main matrix: only the rejoin scenario and the 1-node cell
    /// (e.g. the rejoin on a large data set)
    #[arg(long)]
    pub(crate) no_matrix: bool,
    /// Skip the rejoin scenario (stop the last node, write, restart it, time it to Synced)
    #[arg(long)]
    pub(crate) no_rejoin: bool,
    /// Write-sets (sysbench oltp_write_only --events) written while the node
    /// is away [default: 100000; with --quick: 2000]
    #[arg(long, value_name = "N")]
    pub(crate) rejoin_writes: Option<u64>,
    /// Rounds of each rejoin variant on each target [default: 3; with --quick: 1]
    #[arg(long)]
    pub(crate) rejoin_rounds: Option<u32>,
    /// The downtime variant: seconds the node stays away under a steady
    /// write load; 0 skips it [default: 60; with --quick: 5]
    #[arg(long, value_name = "SECONDS")]
    pub(crate) rejoin_downtime: Option<u32>,
    /// Transactions per second of that load [default: 1000; with --quick: 200]
    #[arg(long, value_name = "TPS")]
    pub(crate) rejoin_rate: Option<u32>,
    /// gcache.size of both providers, the same on both [default: 512M, enough
    /// for an IST of the rejoin writes; with --quick: 128M; with --no-rejoin:
    /// the providers' own default]
    #[arg(long, value_name = "SIZE")]
    pub(crate) gcache_size: Option<String>,
    /// Skip the 1-node cell (every replicated cluster shrunk to node 1, against standalone)
    #[arg(long)]
    pub(crate) no_single_node: bool,
    /// Extra wsrep_provider_options item of Tandem only, e.g. gcache.fsync=YES; repeatable
    #[arg(long = "tandem-option", value_name = "KEY=VAL", value_parser = tandem::cluster::config::parse_key_value)]
    pub(crate) tandem_options: Vec<(String, String)>,
    /// TLS on the group channel of both providers (`tandem cluster up --tls`:
    /// the same certificates, Galera's option names), and on SST. Compare
    /// with a run without it for the cost of TLS
    #[arg(long)]
    pub(crate) tls: bool,
    /// Also measure what TLS costs inside this run: a TLS cluster of each
    /// replicated provider next to the plaintext one, oltp_write_only 16
    /// threads spread over the nodes on all four, in rounds
    #[arg(long, conflicts_with_all = ["tls", "no_matrix"])]
    pub(crate) tls_cell: bool,
    /// Also measure causal reads: point selects with wsrep_sync_wait=1 on
    /// node 2 while node 1 writes, on each replicated provider
    #[arg(long)]
    pub(crate) causal_cell: bool,
    /// Also measure flow control: the last node applies slowly (one applier,
    /// a table without primary key there) while node 1 writes; the writers'
    /// throughput, the slow node's lag and the time paused, per provider
    #[arg(long)]
    pub(crate) fc_cell: bool,
    /// Also measure streaming replication: one large transaction on node 1
    /// in 1 MiB fragments while the last node takes ordinary writes; its
    /// INSERT and COMMIT times and every node's peak RSS, per provider
    #[arg(long)]
    pub(crate) stream_cell: bool,
    /// The streaming cell's transaction, MiB of rows [default: 100, 10 with --quick]
    #[arg(long, value_name = "MIB")]
    pub(crate) stream_mib: Option<u64>,
    /// Also measure state transfers: node 2 of a 2-node Tandem cluster of its
    /// own rejoins empty by the mariabackup and the tandem SST methods in
    /// turn, next to a raw tar | socat copy of the same data directory
    #[arg(long)]
    pub(crate) sst_cell: bool,
    /// The SST cell's data directory, GiB of sysbench data [default: 2, 0.1 with --quick]
    #[arg(long, value_name = "GIB")]
    pub(crate) sst_gib: Option<f64>,
}

/// Three rounds of 6 s rather than one of 18 s: on this kind of VM the noise
/// is a stall of a few seconds now and then, which the median of three
/// rounds outvotes and one long run averages in. Measured: with one 10 s
/// round, two runs' T/G ratios of a cell differed by up to 79% (docs/benchmarks.md, runs 3 and 4).
const DEFAULT_ROUNDS: u32 = 3;

/// The sizes of a run, after `--quick` and the explicit options.
pub(crate) struct Sizes {
    pub(crate) matrix: Matrix,
    pub(crate) data: DataSet,
    pub(crate) warmup_s: u32,
    pub(crate) duration_s: u32,
    /// None with --no-rejoin.
    pub(crate) rejoin: Option<rejoin::Plan>,
    /// `wsrep_provider_options` items of both providers.
    pub(crate) provider_options: Vec<(String, String)>,
}

pub(crate) fn sizes(args: &BenchArgs) -> Result<Sizes> {
    let q = args.quick;
    let workloads = args.workloads.clone().unwrap_or_else(|| {
        if q {
            vec![Workload::OltpWriteOnly, Workload::OltpPointSelect]
        } else {
            Workload::ALL.to_vec()
        }
    });
    let threads = args.threads.clone().unwrap_or_else(|| if q { vec![1, 8] } else { vec![1, 4, 16, 64] });
    let placements = args.placements.clone().unwrap_or_else(|| vec![Placement::Node1, Placement::Spread]);
    if threads.is_empty() || threads.contains(&0) {
        bail!("--threads needs positive numbers");
    }
    let mut targets = args.targets.clone();
    targets.dedup();
    // The null provider runs only where every target has one node: with
    // clusters of several nodes that is the 1-node cell alone.
    if args.nodes > 1 && args.no_single_node {
        targets.retain(|&t| t != ProviderKind::Null);
    }
    let s = Sizes {
        matrix: Matrix {
            workloads,
            threads,
            placements,
            targets,
            nodes: usize::from(args.nodes),
            rounds: args.rounds.unwrap_or(if q { 1 } else { DEFAULT_ROUNDS }),
        },
        data: DataSet {
            tables: args.tables.unwrap_or(if q { 2 } else { 8 }),
            table_size: args.table_size.unwrap_or(if q { 10_000 } else { 100_000 }),
        },
        warmup_s: args.warmup.unwrap_or(if q { 1 } else { 2 }),
        duration_s: args.duration.unwrap_or(if q { 5 } else { 6 }),
        rejoin: (!args.no_rejoin).then(|| rejoin::Plan {
            writes: args.rejoin_writes.unwrap_or(if q { 2_000 } else { 100_000 }),
            rounds: args.rejoin_rounds.unwrap_or(if q { 1 } else { DEFAULT_ROUNDS }),
            downtime_s: args.rejoin_downtime.unwrap_or(if q { 5 } else { 60 }),
            rate: args.rejoin_rate.unwrap_or(if q { 200 } else { 1000 }),
        }),
        provider_options: Vec::new(),
    };
    if s.data.tables == 0 || s.data.table_size == 0 || s.duration_s == 0 || s.matrix.rounds == 0 {
        bail!("--tables, --table-size, --duration and --rounds must be positive");
    }
    if let Some(p) = &s.rejoin {
        if p.writes == 0 || p.rounds == 0 || (p.downtime_s > 0 && p.rate == 0) {
            bail!("--rejoin-writes, --rejoin-rounds and --rejoin-rate must be positive");
        }
    }
    let gcache = args
        .gcache_size
        .clone()
        .or_else(|| s.rejoin.as_ref().map(|_| if q { "128M".to_string() } else { DEFAULT_GCACHE.to_string() }));
    let mut s = s;
    if let Some(size) = gcache {
        s.provider_options.push(("gcache.size".into(), size));
    }
    Ok(s)
}

/// Both providers' gcache for the rejoin scenario: an IST needs the donor to
/// still hold every write-set the node missed. Measured (`tandem-lab bench
/// --quick`, node 1's `wsrep_replicated_bytes` over 2000 write-sets): an
/// `oltp_write_only` write-set is 1.73 KiB with Galera and 1.57 KiB with
/// Tandem, so 100000 of them take about 170 MiB, and a minute at 1000 per
/// second about 100 MiB: this leaves three times that. Not more: Galera maps
/// its ring buffer into the process, and what it has written of it counts
/// in its RSS (the report splits RSS into anonymous and file pages).
const DEFAULT_GCACHE: &str = "512M";

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bench::report;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    pub(crate) fn args(words: &[&str]) -> BenchArgs {
        Cli::try_parse_from(std::iter::once("bench").chain(words.iter().copied())).unwrap().bench
    }

    #[test]
    fn rejoin_is_on_by_default_with_a_gcache_for_it() {
        let full = sizes(&args(&[])).unwrap();
        let p = full.rejoin.unwrap();
        assert_eq!((p.writes, p.rounds, p.downtime_s, p.rate), (100_000, 3, 60, 1000));
        assert_eq!(full.provider_options, [("gcache.size".to_string(), "512M".to_string())]);
        let quick = sizes(&args(&["--quick"])).unwrap();
        let p = quick.rejoin.unwrap();
        assert_eq!((p.writes, p.rounds, p.downtime_s, p.rate), (2000, 1, 5, 200));
        assert_eq!(quick.provider_options, [("gcache.size".to_string(), "128M".to_string())]);
        let p = sizes(&args(&["--rejoin-writes", "5000", "--rejoin-rounds", "2", "--rejoin-downtime", "0"]))
            .unwrap()
            .rejoin
            .unwrap();
        assert_eq!((p.writes, p.rounds, p.downtime_s), (5000, 2, 0));
        assert_eq!(p.variants().len(), 3, "downtime 0 skips that variant");
    }

    #[test]
    fn no_rejoin_keeps_the_providers_defaults() {
        let s = sizes(&args(&["--no-rejoin"])).unwrap();
        assert!(s.rejoin.is_none());
        assert!(s.provider_options.is_empty(), "settings stay comparable with earlier runs");
        let s = sizes(&args(&["--no-rejoin", "--gcache-size", "2G"])).unwrap();
        assert_eq!(s.provider_options, [("gcache.size".to_string(), "2G".to_string())]);
        assert!(sizes(&args(&["--rejoin-writes", "0"])).is_err());
        assert!(sizes(&args(&["--rejoin-rate", "0"])).is_err());
        assert!(sizes(&args(&["--rejoin-rate", "0", "--rejoin-downtime", "0"])).is_ok());
    }

    #[test]
    fn the_null_provider_is_a_default_target_where_a_cell_runs_it() {
        use ProviderKind::*;
        assert_eq!(sizes(&args(&[])).unwrap().matrix.targets, [Tandem, Galera, Standalone, Null]);
        let none = sizes(&args(&["--no-single-node"])).unwrap();
        assert_eq!(none.matrix.targets, [Tandem, Galera, Standalone], "3 nodes, no 1-node cell");
        let one = sizes(&args(&["--no-single-node", "--nodes", "1"])).unwrap();
        assert!(one.matrix.targets.contains(&Null), "1-node clusters: the matrix runs it");
    }

    #[test]
    fn the_large_rejoin_command_parses() {
        let words: Vec<&str> = report::LARGE_REJOIN.split_whitespace().skip(2).collect();
        let a = args(&words);
        assert!(a.no_matrix && a.no_single_node && !a.no_rejoin);
        let s = sizes(&a).unwrap();
        assert_eq!((s.data.tables, s.data.table_size), (8, 1_000_000));
    }

    #[test]
    fn rounds_default_to_three_and_quick_to_one() {
        assert_eq!(sizes(&args(&[])).unwrap().matrix.rounds, 3);
        assert_eq!(sizes(&args(&["--quick"])).unwrap().matrix.rounds, 1);
        assert_eq!(sizes(&args(&["--quick", "--rounds", "2"])).unwrap().matrix.rounds, 2);
        assert!(sizes(&args(&["--rounds", "0"])).is_err());
    }

    #[test]
    fn compare_with_needs_render_from() {
        assert!(Cli::try_parse_from(["bench", "--compare-with", "x.json"]).is_err());
    }
}
