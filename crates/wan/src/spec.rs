//! The emulator's settings as a user writes them: `--site east=10.77.1.0/24`
//! and `--link east-west:rtt=50ms,jitter=2ms,loss=1%,rate=100mbit`. Every
//! error names the text it could not read and what it expected.

use std::net::Ipv4Addr;
use std::time::Duration;

use anyhow::{anyhow, bail, ensure, Context, Result};

use crate::link::LinkSpec;

/// A site: a name and the IPv4 subnet its nodes live in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteSpec {
    pub name: String,
    pub network: Ipv4Addr,
    pub prefix: u8,
}

impl SiteSpec {
    /// `name=a.b.c.d/len`.
    pub fn parse(text: &str) -> Result<SiteSpec> {
        let (name, net) = text.split_once('=').ok_or_else(|| anyhow!("site {text:?}: expected NAME=ADDRESS/PREFIX"))?;
        ensure!(valid_name(name), "site {text:?}: a name of letters, digits, '_' or '.'");
        let (addr, prefix) = net.split_once('/').ok_or_else(|| anyhow!("site {text:?}: expected ADDRESS/PREFIX"))?;
        let network: Ipv4Addr =
            addr.parse().with_context(|| format!("site {text:?}: {addr:?} is not an IPv4 address"))?;
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= 32)
            .ok_or_else(|| anyhow!("site {text:?}: prefix {prefix:?} is not a number from 0 to 32"))?;
        ensure!(u32::from(network) & !mask(prefix) == 0, "site {text:?}: {network} has bits set past /{prefix}");
        Ok(SiteSpec { name: name.to_string(), network, prefix })
    }

    pub fn contains(&self, addr: Ipv4Addr) -> bool {
        u32::from(addr) & mask(self.prefix) == u32::from(self.network)
    }
}

fn mask(prefix: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// One `--link`: the sites it joins and how it behaves each way.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkArg {
    pub from: String,
    pub to: String,
    /// `a-b` sets both directions, `a>b` only from `a` to `b`.
    pub both_ways: bool,
    pub spec: LinkSpec,
}

impl LinkArg {
    /// `A-B:key=value,...` or `A>B:key=value,...`. Keys: `rtt` (a round
    /// trip, half each way) or `delay` (one way), `jitter`, `loss` (a
    /// percentage, each way), `rate` (`kbit`, `mbit`, `gbit`), `buffer`, and
    /// the flag `reorder`.
    pub fn parse(text: &str) -> Result<LinkArg> {
        let (ends, settings) = text.split_once(':').unwrap_or((text, ""));
        let (from, to, both_ways) = match (ends.split_once('-'), ends.split_once('>')) {
            (Some((a, b)), None) => (a, b, true),
            (None, Some((a, b))) => (a, b, false),
            _ => bail!("link {text:?}: expected SITE-SITE or SITE>SITE before ':'"),
        };
        ensure!(valid_name(from) && valid_name(to), "link {text:?}: site names of letters, digits, '_' or '.'");
        ensure!(from != to, "link {text:?}: a link joins two different sites");
        let mut spec = LinkSpec::default();
        for item in settings.split(',').filter(|s| !s.is_empty()) {
            set(&mut spec, item).with_context(|| format!("link {text:?}"))?;
        }
        Ok(LinkArg { from: from.to_string(), to: to.to_string(), both_ways, spec })
    }
}

fn set(spec: &mut LinkSpec, item: &str) -> Result<()> {
    let (key, value) = item.split_once('=').unwrap_or((item, ""));
    match key {
        "rtt" => spec.delay = duration(value)? / 2,
        "delay" => spec.delay = duration(value)?,
        "jitter" => spec.jitter = duration(value)?,
        "buffer" => spec.buffer = duration(value)?,
        "loss" => spec.loss = percentage(value)?,
        "rate" => spec.rate_bits = Some(rate(value)?),
        "reorder" if value.is_empty() => spec.reorder = true,
        _ => bail!("unknown setting {item:?} (rtt, delay, jitter, loss, rate, buffer, reorder)"),
    }
    Ok(())
}

/// `50ms`, `1.5ms`, `200us`, `2s`.
pub fn duration(text: &str) -> Result<Duration> {
    let (number, scale) = [("us", 1e-6), ("ms", 1e-3), ("s", 1.0)]
        .iter()
        .find_map(|(unit, scale)| text.strip_suffix(unit).map(|n| (n, *scale)))
        .ok_or_else(|| anyhow!("{text:?} is not a duration (such as 50ms, 200us or 2s)"))?;
    let value: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| anyhow!("{text:?} is not a duration (such as 50ms, 200us or 2s)"))?;
    ensure!(value * scale <= 3600.0, "{text:?} is longer than an hour");
    Ok(Duration::from_secs_f64(value * scale))
}

/// `1%`, `0.5%`.
fn percentage(text: &str) -> Result<f64> {
    let value: f64 = text
        .strip_suffix('%')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| anyhow!("{text:?} is not a percentage (such as 1% or 0.5%)"))?;
    ensure!((0.0..=100.0).contains(&value), "{text:?}: a loss from 0% to 100%");
    Ok(value / 100.0)
}

/// `100mbit`, `1gbit`, `512kbit`: bits per second.
fn rate(text: &str) -> Result<u64> {
    let (number, scale) = [("kbit", 1e3), ("mbit", 1e6), ("gbit", 1e9)]
        .iter()
        .find_map(|(unit, scale)| text.strip_suffix(unit).map(|n| (n, *scale)))
        .ok_or_else(|| anyhow!("{text:?} is not a rate (such as 512kbit, 100mbit or 1gbit)"))?;
    let value: f64 = number.parse().map_err(|_| anyhow!("{text:?} is not a rate (such as 100mbit)"))?;
    let bits = (value * scale).round();
    ensure!((1000.0..=1e12).contains(&bits), "{text:?}: a rate from 1kbit to 1000gbit");
    Ok(bits as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites_parse_and_match_their_subnet() {
        let site = SiteSpec::parse("east=10.77.1.0/24").unwrap();
        assert_eq!(site.network, Ipv4Addr::new(10, 77, 1, 0));
        assert!(site.contains(Ipv4Addr::new(10, 77, 1, 9)));
        assert!(!site.contains(Ipv4Addr::new(10, 77, 2, 9)));
        assert!(SiteSpec::parse("all=0.0.0.0/0").unwrap().contains(Ipv4Addr::new(1, 2, 3, 4)));
        for bad in
            ["east", "east=10.77.1.0", "east=10.77.1.1/24", "east=10.77.1.0/33", "=10.0.0.0/8", "e st=10.0.0.0/8"]
        {
            assert!(SiteSpec::parse(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn links_parse_each_setting() {
        let link = LinkArg::parse("east-west:rtt=50ms,jitter=2ms,loss=1.5%,rate=100mbit,buffer=1s,reorder").unwrap();
        assert_eq!((link.from.as_str(), link.to.as_str(), link.both_ways), ("east", "west", true));
        let s = link.spec;
        assert_eq!(s.delay, Duration::from_millis(25));
        assert_eq!(s.jitter, Duration::from_millis(2));
        assert!((s.loss - 0.015).abs() < 1e-12);
        assert_eq!(s.rate_bits, Some(100_000_000));
        assert_eq!(s.buffer, Duration::from_secs(1));
        assert!(s.reorder);
        let one_way = LinkArg::parse("a>b:delay=200us").unwrap();
        assert!(!one_way.both_ways);
        assert_eq!(one_way.spec.delay, Duration::from_micros(200));
        assert_eq!(LinkArg::parse("a-b").unwrap().spec, LinkSpec::default());
    }

    #[test]
    fn bad_links_say_what_is_wrong() {
        for (bad, says) in [
            ("a:rtt=1ms", "SITE-SITE"),
            ("a-a:rtt=1ms", "two different sites"),
            ("a-b:rtt=fast", "not a duration"),
            ("a-b:loss=5", "not a percentage"),
            ("a-b:loss=120%", "from 0% to 100%"),
            ("a-b:rate=100", "not a rate"),
            ("a-b:rate=0kbit", "from 1kbit"),
            ("a-b:color=red", "unknown setting"),
            ("a-b:rtt=2h", "not a duration"),
        ] {
            let e = format!("{:#}", LinkArg::parse(bad).unwrap_err());
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
