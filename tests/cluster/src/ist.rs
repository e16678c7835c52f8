//! What a node that came back by IST shows of it: PXC's
//! `wsrep_ist_receive_status` while it runs (empty before and after),
//! Galera's log lines, and the metrics that keep the last IST's numbers.

use anyhow::{anyhow, Context, Result};
use tandem::cluster::state::Node;
use tandem::cluster::Cluster;

use crate::{error_log, sql, tail};

/// What a node's error log says of its last IST, once all of it was
/// applied: the local seqno it resumed at ("Resuming at local seqno N") and
/// the last seqno received (Galera's "IST received: uuid:seqno"), logged
/// after it.
pub fn ist_received(node: &Node) -> Option<(i64, i64)> {
    let log = error_log(node);
    let lines: Vec<&str> = log.lines().collect();
    let at = lines.iter().rposition(|l| l.contains("Resuming at local seqno "))?;
    let resumed = lines[at].split("Resuming at local seqno ").nth(1)?.split(':').next()?.trim().parse().ok()?;
    let last =
        lines[at..].iter().find_map(|l| l.split("IST received: ").nth(1)?.rsplit(':').next()?.trim().parse().ok())?;
    Some((resumed, last))
}

/// `wsrep_ist_receive_status` (PXC's "100% complete, received seqno 306 of 6-306").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IstStatus {
    pub percent: i64,
    pub received: i64,
    pub first: i64,
    pub last: i64,
}

/// None when the node is receiving no IST (the variable is empty, as in PXC,
/// before and after one).
pub fn ist_status(node: &Node) -> Result<Option<IstStatus>> {
    let out = sql(node, "SHOW GLOBAL STATUS LIKE 'wsrep_ist_receive_status'").map_err(anyhow::Error::msg)?;
    let text = out.split('\t').nth(1).unwrap_or_default().trim().to_string();
    if text.is_empty() {
        return Ok(None);
    }
    parse_ist_status(&text).map(Some).with_context(|| format!("wsrep_ist_receive_status on {} is {text:?}", node.name))
}

fn parse_ist_status(text: &str) -> Option<IstStatus> {
    let (percent, rest) = text.split_once("% complete, received seqno ")?;
    let (received, range) = rest.split_once(" of ")?;
    let (first, last) = range.split_once('-')?;
    Some(IstStatus {
        percent: percent.trim().parse().ok()?,
        received: received.trim().parse().ok()?,
        first: first.trim().parse().ok()?,
        last: last.trim().parse().ok()?,
    })
}

/// The IST is done: the status is empty, as in PXC; the log (Galera's lines
/// too) and the metrics say what was received, from right after the node's
/// own data at `position` to the group's last seqno at least.
pub fn ist_was_received(
    c: &Cluster,
    node: usize,
    ist: Option<IstStatus>,
    position: i64,
    group_last: i64,
) -> Result<()> {
    assert_eq!(ist, None, "wsrep_ist_receive_status is empty once the IST is done");
    let last = ist_went_on_from(c, node, position)?;
    assert!(last >= group_last, "the IST reaches the group's last seqno {group_last}: {last}");
    Ok(())
}

/// An IST went on from right after `position` (the node's own data): the
/// log has Galera's lines for it and the metrics agree. Returns its last
/// seqno, which a test whose cluster kept writing checks against its own bounds.
pub fn ist_went_on_from(c: &Cluster, node: usize, position: i64) -> Result<i64> {
    let (resumed, last) =
        ist_received(c.node(node)).ok_or_else(|| anyhow!("no \"IST received\" in node {node}'s log"))?;
    assert_eq!(resumed, position, "the IST starts right after the node's own data");
    let log = error_log(c.node(node));
    for line in [format!("WSREP: Receiving IST: {} writesets, seqnos {}-{last}", last - position, position + 1)]
        .into_iter()
        .chain([" -> JOINED (TO: ".into(), "WSREP: Shifting JOINED -> SYNCED (TO: ".into()])
    {
        assert!(log.contains(&line), "Galera's line {line:?} in node {node}'s log:\n{}", tail(&log));
    }
    let metrics = c.node(node).health_addr().ok_or_else(|| anyhow!("no health port"))?;
    let (_, page) = tandem::cluster::endpoints::http_get(metrics, "/metrics")?;
    let sample = |name: &str| page.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok());
    for (series, expected) in [
        ("tandem_ist_first_seqno", (position + 1) as f64),
        ("tandem_ist_last_seqno", last as f64),
        ("tandem_ist_remaining_write_sets", 0.0),
        ("tandem_ist_progress_ratio", 1.0),
    ] {
        assert_eq!(sample(series), Some(expected), "{series} on node {node}'s /metrics:\n{page}");
    }
    Ok(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ist_status_parsing() {
        let s = parse_ist_status("100% complete, received seqno 306 of 6-306").unwrap();
        assert_eq!(s, IstStatus { percent: 100, received: 306, first: 6, last: 306 });
        assert_eq!(parse_ist_status("garbage"), None);
    }
}
