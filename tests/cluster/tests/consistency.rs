//! List-append histories (issue 49) on 3-node clusters under faults
//! (tests/cluster/src/la_faults.rs), each run on a fresh cluster and its
//! history checked by `tandem_verify` (tests/cluster/src/la_matrix.rs):
//! nothing acknowledged lost, no divergence, no read of a rolled-back or
//! half-seen transaction, every read a prefix of one order, no G0 or G1c
//! cycle, and no stale read where the server synced. With
//! `innodb_snapshot_isolation=ON` (as MariaDB 11.6 has by default) no lost
//! update or read skew (G-single) either.
//!
//! - `make test`: Tandem under a kill, and every node killed at once at
//!   flush 0; Galera, the control, under the same crash, its findings
//!   reported and never asserted on (its flush-0 losses are Galera's,
//!   MDEV-38974), only that a history was checked.
//! - `make test-partitions` (network namespaces): Tandem with one node cut
//!   off, with the leader cut off, and with the leader paused past the
//!   suspect timeout; Galera under a kill.
//! - `make consistency`: the whole matrix on both providers, writing the
//!   table of docs/consistency.md.
//!
//! `TANDEM_LA_SEED=n` draws other transactions (default 1).

use anyhow::{ensure, Result};
use tandem::cluster::ProviderKind;
use tandem_cluster_tests::la_faults::Fault;
use tandem_cluster_tests::la_matrix::{self, Cell, Run};
use tandem_cluster_tests::netns::Net;
use tandem_cluster_tests::*;

fn seed() -> Result<u64> {
    Ok(std::env::var("TANDEM_LA_SEED").map_or(Ok(1), |s| s.parse())?)
}

/// `cell` on a fresh cluster of the provider (Galera's when `galera`), on
/// network namespaces when its fault cuts links.
fn run_cell(cell: Cell, galera: bool) -> Result<Run> {
    // Declared first, dropped last: the cluster stops before its network.
    let net = if cell.fault.needs_network() { Some(Net::new(3)?) } else { None };
    let mut c = up_with(3, |spec| {
        if let Some(net) = &net {
            spec.hosts = net.hosts();
        }
        spec.mysqld_options.extend(cell.options());
        if galera {
            spec.provider = ProviderKind::Galera;
            spec.provider_path = None;
        }
    })?;
    la_matrix::run(&mut c, net.as_ref(), cell, galera, seed()?)
}

/// Tandem keeps every promise of the cell, on a history worth checking.
fn tandem_keeps_its_promises(cell: Cell) -> Result<()> {
    let run = run_cell(cell, false)?;
    ensure!(
        run.worth_checking(),
        "a history worth checking: {} appends, {} synced reads",
        run.appends,
        run.synced_reads
    );
    let broken = run.broken(&cell.promised());
    ensure!(broken.is_empty(), "{:?}: broken {broken:?}:\n{}", cell, run.report);
    Ok(())
}

#[test]
fn list_append_histories_stay_clean_through_a_kill() -> Result<()> {
    tandem_keeps_its_promises(Cell::new(Fault::KillOne))
}

#[test]
#[ignore = "in CI's partition step, for time: make test-partitions"]
fn list_append_histories_stay_clean_through_a_pause_of_the_leader() -> Result<()> {
    tandem_keeps_its_promises(Cell::new(Fault::PauseLeader))
}

/// Every node killed at the same instant, with InnoDB flushing its log
/// once a second, then all restarted as configured: what InnoDB lost, the
/// group log gives back. Jepsen's analysis of Galera found acknowledged
/// commits lost this way.
#[test]
fn list_append_histories_stay_clean_when_every_node_is_killed_at_flush_0() -> Result<()> {
    tandem_keeps_its_promises(Cell { flush: 0, ..Cell::new(Fault::KillAll) })
}

#[test]
#[ignore = "needs network namespaces: make test-partitions"]
fn list_append_histories_stay_clean_with_a_node_cut_off() -> Result<()> {
    tandem_keeps_its_promises(Cell::new(Fault::IsolateOne))
}

#[test]
#[ignore = "needs network namespaces: make test-partitions"]
fn list_append_histories_stay_clean_with_the_leader_cut_off() -> Result<()> {
    tandem_keeps_its_promises(Cell::new(Fault::IsolateLeader))
}

/// The control: the same clients and faults on Galera. Its findings are
/// printed as a row of the table, never asserted on; the test asserts
/// only that a history worth checking was checked. After the flush-0
/// crash it says whether the checker found Galera's losses; when it does
/// not, the crash was too weak to show them this time.
fn galera_control(cell: Cell) -> Result<()> {
    let run = run_cell(cell, true)?;
    println!("{}", la_matrix::row("Galera", cell, Ok(&run)));
    ensure!(run.worth_checking(), "Galera {cell:?}: too little history to check");
    if cell.flush == 0 {
        println!("control: {}", la_matrix::control_verdict(run.report.count(tandem_verify::Kind::Lost)));
    }
    Ok(())
}

#[test]
fn galera_control_when_every_node_is_killed_at_flush_0() -> Result<()> {
    galera_control(Cell { flush: 0, ..Cell::new(Fault::KillAll) })
}

#[test]
#[ignore = "the control on Galera, in CI's partition step for time: make test-partitions"]
fn galera_control_under_a_kill() -> Result<()> {
    galera_control(Cell::new(Fault::KillOne))
}

/// The matrix (`make consistency`): every cell of `la_matrix::cells`, or
/// those whose fault `TANDEM_LA_FAULTS` names (comma-separated), on each
/// provider of `TANDEM_LA_PROVIDERS` (default "tandem,galera"). The table
/// goes to the file `TANDEM_LA_TABLE` names, between its matrix markers
/// (docs/consistency.md), or is printed. Fails at the end if a Tandem row
/// broke a promise or did not run.
#[test]
#[ignore = "the whole matrix, by hand: make consistency"]
fn list_append_matrix() -> Result<()> {
    let faults = std::env::var("TANDEM_LA_FAULTS").ok();
    let wanted = |cell: &Cell| faults.as_deref().is_none_or(|f| f.split(',').any(|n| n == cell.fault.name()));
    let providers = std::env::var("TANDEM_LA_PROVIDERS").unwrap_or_else(|_| "tandem,galera".into());
    let mut rows = vec![];
    let mut failures = vec![];
    for cell in la_matrix::cells().into_iter().filter(wanted) {
        for provider in providers.split(',') {
            let galera = provider == "galera";
            let name = if galera { "Galera" } else { "Tandem" };
            let run = run_cell(cell, galera).map_err(|e| format!("{e:#}"));
            if !galera {
                match &run {
                    Ok(r) if !r.broken(&cell.promised()).is_empty() => failures.push(format!("{cell:?}: broken")),
                    Ok(_) => {}
                    Err(e) => failures.push(format!("{cell:?}: {e}")),
                }
            }
            let row = la_matrix::row(name, cell, run.as_ref().map_err(String::as_str));
            println!("{row}");
            rows.push(row);
        }
    }
    la_matrix::write_table(std::env::var_os("TANDEM_LA_TABLE").map(std::path::PathBuf::from), &rows)?;
    ensure!(failures.is_empty(), "Tandem rows that failed: {failures:#?}");
    Ok(())
}
