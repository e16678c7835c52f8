//! The WAN emulator tested on its own (issue 47): sites in network
//! namespaces joined by `tandem wan emulate`, measured with `tandem wan
//! probe` against `tandem wan echo`. What a link is set to is what a probe
//! across it sees: the round trip within 10%, the loss within a few
//! percent, the rate within 10%, no reordering unless asked for (and some
//! when asked, so that the reordering count is known to bite), and nothing
//! added within a site.
//!
//! Root and network namespaces are needed, so these are `#[ignore]`d in
//! `make test-cluster` and run by `make test-wan` (CI runs it where the
//! machine allows namespaces, and says when it does not).

use anyhow::{ensure, Result};
use tandem_cluster_tests::wan::{probe, tandem_binary, value, Echo};
use tandem_wan::layout::Layout;

/// Sites of `sizes` nodes, the emulator running with `links`, and its log.
fn layout(sizes: &[usize], links: &[&str]) -> Result<(Layout, tempfile::TempDir)> {
    let mut layout = Layout::new(sizes)?;
    let dir = tempfile::tempdir()?;
    let links: Vec<String> = links.iter().map(|l| l.to_string()).collect();
    layout.emulate(&tandem_binary()?, &links, 7, &dir.path().join("emulator.log"))?;
    Ok((layout, dir))
}

fn within(measured: f64, set: f64, share: f64) -> bool {
    (measured - set).abs() <= set * share
}

#[test]
#[ignore = "root and network namespaces: make test-wan"]
fn a_round_trip_is_what_the_link_is_set_to_and_keeps_its_order() -> Result<()> {
    let (layout, _log) = layout(&[1, 1], &["s1-s2:rtt=40ms"])?;
    let _echo = Echo::start(&layout, 2)?;
    let p = probe(&layout, 1, 2, 200, "5ms", 64)?;
    let rtt = value(&p, "rtt_p50_ms")?;
    ensure!(within(rtt, 40.0, 0.10), "median round trip {rtt} ms for a 40 ms link");
    ensure!(value(&p, "rtt_min_ms")? >= 40.0, "no answer can beat the delay: {p:?}");
    ensure!(value(&p, "reordered")? == 0.0, "reordered without being asked: {p:?}");
    ensure!(value(&p, "loss_pct")? <= 1.0, "lost on a link without loss: {p:?}");
    Ok(())
}

#[test]
#[ignore = "root and network namespaces: make test-wan"]
fn jitter_keeps_a_flow_in_order_unless_reordering_is_asked_for() -> Result<()> {
    let (mut layout, log) = layout(&[1, 1], &["s1-s2:rtt=20ms,jitter=5ms"])?;
    let echo = Echo::start(&layout, 2)?;
    let p = probe(&layout, 1, 2, 1000, "1ms", 64)?;
    ensure!(value(&p, "reordered")? == 0.0, "jitter reordered a flow: {p:?}");
    // Each way 10 ms less up to 5 ms: a round trip under 10 ms is wrong.
    ensure!(value(&p, "rtt_min_ms")? >= 10.0, "{p:?}");
    ensure!(value(&p, "rtt_max_ms")? > value(&p, "rtt_min_ms")? + 2.0, "no jitter at all: {p:?}");

    // The same jitter with reordering allowed: packets 1 ms apart with
    // ±5 ms each way overtake each other, and the probe counts it.
    drop(echo);
    let links = ["s1-s2:rtt=20ms,jitter=5ms,reorder".to_string()];
    layout.emulate(&tandem_binary()?, &links, 7, &log.path().join("emulator.log"))?;
    let _echo = Echo::start(&layout, 2)?;
    let p = probe(&layout, 1, 2, 1000, "1ms", 64)?;
    ensure!(value(&p, "reordered")? >= 50.0, "reordering asked for, and the probe saw little: {p:?}");
    Ok(())
}

#[test]
#[ignore = "root and network namespaces: make test-wan"]
fn loss_is_what_the_link_is_set_to() -> Result<()> {
    let (layout, _log) = layout(&[1, 1], &["s1-s2:rtt=10ms,loss=5%"])?;
    let _echo = Echo::start(&layout, 2)?;
    let p = probe(&layout, 1, 2, 2000, "1ms", 64)?;
    // 5% each way: a round trip is lost with 1 - 0.95² = 9.75%. One
    // standard deviation over 2,000 probes is 0.66%; three points is 4.5 of them.
    let lost = value(&p, "loss_pct")?;
    ensure!(within(lost, 9.75, 3.0 / 9.75), "{lost}% of round trips lost, 9.75% expected");
    Ok(())
}

#[test]
#[ignore = "root and network namespaces: make test-wan"]
fn a_capped_link_carries_its_rate() -> Result<()> {
    // Capped one way only, so that the answers come back at the wire's pace.
    let (layout, _log) = layout(&[1, 1], &["s1>s2:rtt=10ms,rate=8mbit", "s2>s1:rtt=10ms"])?;
    let _echo = Echo::start(&layout, 2)?;
    // 100 datagrams of 1000 bytes sent at once: 1028 bytes each on the
    // wire (IP and UDP headers), 1.028 ms each at 8 Mbit/s; 103 ms of queue,
    // inside the default 200 ms buffer.
    let p = probe(&layout, 1, 2, 100, "0ms", 1000)?;
    ensure!(value(&p, "received")? == 100.0, "{p:?}");
    let span = value(&p, "span_ms")? / 1e3;
    let rate = 99.0 * 1028.0 * 8.0 / span;
    ensure!(within(rate, 8e6, 0.10), "{rate:.0} bit/s through an 8 Mbit/s link: {p:?}");
    Ok(())
}

#[test]
#[ignore = "root and network namespaces: make test-wan"]
fn a_site_talks_within_itself_at_lan_speed_and_across_at_the_wans() -> Result<()> {
    let (layout, _log) = layout(&[2, 1], &["s1-s2:rtt=50ms"])?;
    let _echo2 = Echo::start(&layout, 2)?;
    let _echo3 = Echo::start(&layout, 3)?;
    let local = probe(&layout, 1, 2, 100, "2ms", 64)?;
    ensure!(value(&local, "rtt_p50_ms")? < 5.0, "within site 1, the WAN's delay was added: {local:?}");
    ensure!(value(&local, "loss_pct")? <= 1.0, "{local:?}");
    let remote = probe(&layout, 1, 3, 100, "2ms", 64)?;
    let rtt = value(&remote, "rtt_p50_ms")?;
    ensure!(within(rtt, 50.0, 0.10), "median round trip {rtt} ms for a 50 ms link: {remote:?}");
    Ok(())
}
