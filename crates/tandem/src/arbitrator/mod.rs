//! `tandem arbitrator`: garbd's role. A voting member of the group without a
//! database, so that two data nodes survive the loss of either one.
//!
//! It runs the engine like a data node does ([`tandem_engine::arbitrator`] is
//! its "server"), on the real group transport, with the provider's option
//! names. It keeps the group log in `--workdir`: a write-set a data node
//! acknowledged is in a majority's log, and that majority may be the other
//! data node's and ours, so it survives the death of the node that took it.
//!
//! Options follow garbd's (`--address`, `--group`, `--options`, `--name`,
//! `--log`, `--workdir`, `--cfg`); `--cfg FILE` holds the same as
//! `key = value` lines, and the command line wins over it.

pub mod logger;

use std::path::PathBuf;
use std::sync::Arc;
use std::thread;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use tandem_engine::arbitrator::Arbitrator;
use tandem_engine::node::RecvEnd;
use tandem_engine::node::{Node, NodeConfig};
use tandem_engine::types::Gtid;
use tandem_group::{GroupStarter, RaftGroup};

/// Applier loops (a server's `recv()` threads): two, so that a task that
/// takes a while in one does not hold up the other.
const RECV_LOOPS: usize = 2;

#[derive(Args, Debug, Default, Clone)]
pub struct ArbitratorArgs {
    /// The group to join: gcomm://host1:port,host2:port (the data nodes'
    /// wsrep_cluster_address)
    #[arg(short = 'a', long, value_name = "GCOMM")]
    address: Option<String>,
    /// The cluster name (wsrep_cluster_name); members of another are refused
    #[arg(short = 'g', long, value_name = "NAME")]
    group: Option<String>,
    /// This member's name in views [default: garb, as garbd's]
    #[arg(short = 'n', long, value_name = "NAME")]
    name: Option<String>,
    /// Provider options, as wsrep_provider_options: gmcast.listen_addr,
    /// socket.ssl*, evs.*, gcache.*
    #[arg(short = 'o', long, value_name = "OPTS")]
    options: Option<String>,
    /// Host the others reach this member at [default: the host of
    /// gmcast.listen_addr when it names one, else 127.0.0.1]
    #[arg(long, value_name = "HOST")]
    node_address: Option<String>,
    /// Where the group log (the gcache) and the member's identity are kept
    /// [default: the current directory, as garbd's]
    #[arg(short = 'w', long, value_name = "DIR")]
    workdir: Option<PathBuf>,
    /// Append the log here instead of stderr
    #[arg(short = 'l', long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Read the settings above from FILE (`key = value` lines: address,
    /// group, name, options, node_address, workdir, log)
    #[arg(short = 'c', long, value_name = "FILE")]
    cfg: Option<PathBuf>,
}

/// Everything the arbitrator runs with, after the config file and the
/// command line are merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub address: String,
    pub group: String,
    pub name: String,
    pub options: String,
    pub node_address: String,
    pub workdir: PathBuf,
    pub log: Option<PathBuf>,
}

impl Settings {
    pub fn resolve(args: &ArbitratorArgs) -> Result<Settings> {
        let file = match &args.cfg {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
                parse_cfg(&text).with_context(|| format!("in {}", path.display()))?
            }
            None => ArbitratorArgs::default(),
        };
        let pick = |a: &Option<String>, b: &Option<String>| a.clone().or_else(|| b.clone());
        let address = pick(&args.address, &file.address)
            .ok_or_else(|| anyhow!("no group address: give --address gcomm://host1,host2 (the data nodes)"))?;
        let peers = tandem_engine::config::parse_cluster_address(&address).map_err(|e| anyhow!("--address: {e}"))?;
        if peers.is_empty() {
            bail!("--address {address} names no member: {}", tandem_engine::node::ARBITRATOR_CANNOT_BOOTSTRAP);
        }
        let group = pick(&args.group, &file.group)
            .ok_or_else(|| anyhow!("no cluster name: give --group NAME (the data nodes' wsrep_cluster_name)"))?;
        let options = pick(&args.options, &file.options).unwrap_or_default();
        // The health listeners belong to the provider, next to a server; an
        // arbitrator would accept them and serve nothing.
        if let Some(key) = options
            .split(';')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, _)| k.trim())
            .find(|k| k.starts_with("health."))
        {
            bail!("--options {key}: an arbitrator serves no health check (it has no server to report on)");
        }
        let node_address = pick(&args.node_address, &file.node_address)
            .or_else(|| listen_host(&options))
            .unwrap_or_else(|| "127.0.0.1".into());
        Ok(Settings {
            address,
            group,
            name: pick(&args.name, &file.name).unwrap_or_else(|| "garb".into()),
            options,
            node_address,
            workdir: args.workdir.clone().or(file.workdir).unwrap_or_else(|| PathBuf::from(".")),
            log: args.log.clone().or(file.log),
        })
    }
}

/// garbd's config file: `key = value` lines, `#` comments, values may be
/// quoted.
pub fn parse_cfg(text: &str) -> Result<ArbitratorArgs> {
    let mut out = ArbitratorArgs::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line.split_once('=').ok_or_else(|| anyhow!("line {}: expected key = value", n + 1))?;
        let value = value.trim().trim_matches('"').trim_matches('\'').to_string();
        match key.trim().replace('-', "_").as_str() {
            "address" => out.address = Some(value),
            "group" => out.group = Some(value),
            "name" => out.name = Some(value),
            "options" => out.options = Some(value),
            "node_address" => out.node_address = Some(value),
            "workdir" => out.workdir = Some(value.into()),
            "log" => out.log = Some(value.into()),
            other => bail!("line {}: unknown setting '{other}'", n + 1),
        }
    }
    Ok(out)
}

/// The host of `gmcast.listen_addr` in a provider options string, unless it
/// is the wildcard (which no peer can dial).
fn listen_host(options: &str) -> Option<String> {
    let value = options.split(';').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k.trim() == "gmcast.listen_addr").then(|| v.trim().to_string())
    })?;
    let addr = value.trim_start_matches("tcp://").trim_start_matches("ssl://");
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).trim_matches(['[', ']']);
    (!host.is_empty() && host != "0.0.0.0" && host != "::").then(|| host.to_string())
}

pub fn run(args: ArbitratorArgs) -> Result<()> {
    let settings = Settings::resolve(&args)?;
    logger::install(settings.log.as_deref())?;
    std::fs::create_dir_all(&settings.workdir)
        .with_context(|| format!("cannot create the work directory {}", settings.workdir.display()))?;
    let mut arbitrator = start(&settings)?;
    let reason = wait_for_end(&mut arbitrator.ended)?;
    log::info!("Arbitrator stopping: {reason}");
    let app = arbitrator.app.clone();
    let stopped = arbitrator.stop();
    log::info!("Arbitrator stopped ({} write-sets passed through)", app.passed());
    stopped
}

/// A started arbitrator: its node and applier loops.
pub struct Running {
    pub node: Node,
    pub app: Arc<Arbitrator>,
    loops: Vec<thread::JoinHandle<RecvEnd>>,
    ended: tokio::sync::mpsc::UnboundedReceiver<()>,
}

/// Joins the group and starts the applier loops.
pub fn start(settings: &Settings) -> Result<Running> {
    let workdir = std::path::absolute(&settings.workdir)?;
    let config = NodeConfig {
        name: settings.name.clone(),
        node_address: settings.node_address.clone(),
        incoming: String::new(),
        data_dir: workdir.clone(),
        options: settings.options.clone(),
        start_position: Gtid::UNDEFINED,
        arbitrator: true,
    };
    log::info!(
        "Tandem {} arbitrator '{}' starting, work directory {}",
        env!("CARGO_PKG_VERSION"),
        settings.name,
        workdir.display()
    );
    let app = Arc::new(Arbitrator::default());
    let factory: tandem_engine::node::GroupFactory = Box::new(|config| {
        let starter: Box<dyn GroupStarter> = Box::new(RaftGroup::open(config)?);
        Ok(starter)
    });
    let node = Node::new(app.clone(), config, factory).map_err(|e| anyhow!("bad --options: {e}"))?;
    app.attach(node.clone());
    if let Err(e) = node.connect(&settings.group, &settings.address, "", false) {
        node.shutdown();
        bail!("cannot join the group: {e:?}");
    }
    let (tx, ended) = tokio::sync::mpsc::unbounded_channel();
    let loops = (0..RECV_LOOPS)
        .map(|i| {
            let (node, tx) = (node.clone(), tx.clone());
            thread::Builder::new()
                .name(format!("arb-recv-{i}"))
                .spawn(move || {
                    let end = node.recv(i);
                    let _ = tx.send(());
                    end
                })
                .expect("spawn an applier loop")
        })
        .collect();
    Ok(Running { node, app, loops, ended })
}

impl Running {
    /// Leaves the group (the others drop us from the membership, so their
    /// quorum no longer counts us) and stops every thread.
    pub fn stop(self) -> Result<()> {
        self.node.disconnect();
        let mut worst = None;
        for handle in self.loops {
            match handle.join() {
                Ok(RecvEnd::Closed) => {}
                Ok(other) => worst = Some(format!("an applier loop ended with {other:?}")),
                Err(_) => worst = Some("an applier loop panicked".to_string()),
            }
        }
        self.node.shutdown();
        worst.map_or(Ok(()), |why| Err(anyhow!(why)))
    }
}

/// Blocks until SIGTERM, SIGINT or the end of an applier loop (the group
/// closed on us, or the node failed). Returns why.
fn wait_for_end(ended: &mut tokio::sync::mpsc::UnboundedReceiver<()>) -> Result<String> {
    use tokio::signal::unix::{signal, SignalKind};
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        Ok(tokio::select! {
            _ = term.recv() => "SIGTERM".to_string(),
            _ = int.recv() => "SIGINT".to_string(),
            _ = ended.recv() => "an applier loop ended".to_string(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(address: &str, group: &str) -> ArbitratorArgs {
        ArbitratorArgs { address: Some(address.into()), group: Some(group.into()), ..Default::default() }
    }

    #[test]
    fn defaults_follow_garbd() {
        let s = Settings::resolve(&args("gcomm://10.0.0.1:4567,10.0.0.2:4567", "prod")).unwrap();
        assert_eq!(s.name, "garb");
        assert_eq!(s.workdir, PathBuf::from("."));
        assert_eq!(s.node_address, "127.0.0.1");
        assert_eq!(s.log, None);
    }

    #[test]
    fn the_listen_host_is_the_advertised_one_unless_it_is_a_wildcard() {
        let mut a = args("gcomm://10.0.0.1", "prod");
        a.options = Some("evs.suspect_timeout=PT5S; gmcast.listen_addr=tcp://10.0.0.3:4567".into());
        assert_eq!(Settings::resolve(&a).unwrap().node_address, "10.0.0.3");
        a.options = Some("gmcast.listen_addr=tcp://0.0.0.0:4567".into());
        assert_eq!(Settings::resolve(&a).unwrap().node_address, "127.0.0.1");
        a.node_address = Some("arb.example".into());
        assert_eq!(Settings::resolve(&a).unwrap().node_address, "arb.example");
    }

    #[test]
    fn an_arbitrator_without_peers_or_a_name_is_refused_with_the_reason() {
        let err = Settings::resolve(&args("gcomm://", "prod")).unwrap_err().to_string();
        assert!(err.contains("cannot bootstrap"), "{err}");
        let mut with_health = args("gcomm://10.0.0.1", "prod");
        with_health.options = Some("evs.suspect_timeout=PT5S;health.address=0.0.0.0:9200".into());
        let err = Settings::resolve(&with_health).unwrap_err().to_string();
        assert!(err.contains("health.address") && err.contains("no health check"), "{err}");
        let err = Settings::resolve(&args("10.0.0.1:4567", "prod")).unwrap_err().to_string();
        assert!(err.contains("gcomm://"), "{err}");
        let err = Settings::resolve(&ArbitratorArgs { group: Some("x".into()), ..Default::default() })
            .unwrap_err()
            .to_string();
        assert!(err.contains("--address"), "{err}");
        let err = Settings::resolve(&ArbitratorArgs { address: Some("gcomm://h".into()), ..Default::default() })
            .unwrap_err()
            .to_string();
        assert!(err.contains("--group"), "{err}");
    }

    #[test]
    fn the_config_file_is_read_and_the_command_line_wins() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("garb.cfg");
        std::fs::write(
            &cfg,
            "# garbd style\naddress = \"gcomm://10.0.0.1,10.0.0.2\"\ngroup = prod\nname = arb1\n\
             options = 'gmcast.listen_addr=tcp://10.0.0.9:4567'\nworkdir = /var/lib/arb\nlog = /var/log/arb.log\n",
        )
        .unwrap();
        let from_file = Settings::resolve(&ArbitratorArgs { cfg: Some(cfg.clone()), ..Default::default() }).unwrap();
        assert_eq!(from_file.address, "gcomm://10.0.0.1,10.0.0.2");
        assert_eq!(from_file.group, "prod");
        assert_eq!(from_file.name, "arb1");
        assert_eq!(from_file.node_address, "10.0.0.9");
        assert_eq!(from_file.workdir, PathBuf::from("/var/lib/arb"));
        assert_eq!(from_file.log, Some(PathBuf::from("/var/log/arb.log")));
        let mut overridden = args("gcomm://10.0.0.5", "staging");
        overridden.cfg = Some(cfg);
        let s = Settings::resolve(&overridden).unwrap();
        assert_eq!((s.address.as_str(), s.group.as_str(), s.name.as_str()), ("gcomm://10.0.0.5", "staging", "arb1"));
    }

    #[test]
    fn a_bad_config_line_is_named() {
        let err = parse_cfg("group = a\nnonsense\n").unwrap_err().to_string();
        assert!(err.contains("line 2"), "{err}");
        let err = parse_cfg("sst = trivial\n").unwrap_err().to_string();
        assert!(err.contains("unknown setting 'sst'"), "{err}");
    }
}
