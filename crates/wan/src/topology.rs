//! Sites and the links between them: which link a packet crosses, found
//! from its IPv4 source and destination. A packet between two sites with no
//! link given, or one the emulator cannot read (not IPv4, an address in no
//! site), passes at once: the emulator delays only what it was asked to.

use std::net::Ipv4Addr;

use anyhow::{anyhow, ensure, Result};

use crate::link::{Link, LinkSpec};
use crate::spec::{LinkArg, SiteSpec};

/// The sites, and one [`Link`] per direction that has one.
#[derive(Debug)]
pub struct Topology {
    sites: Vec<SiteSpec>,
    /// By `from * sites + to`.
    links: Vec<Option<Link>>,
}

impl Topology {
    /// Later `--link` arguments override earlier ones for the directions
    /// they name.
    pub fn new(sites: Vec<SiteSpec>, links: &[LinkArg]) -> Result<Topology> {
        ensure!(sites.len() >= 2, "at least two sites are needed for a link between them");
        for (i, a) in sites.iter().enumerate() {
            for b in &sites[i + 1..] {
                ensure!(a.name != b.name, "site {} is given twice", a.name);
                let overlap = a.contains(b.network) || b.contains(a.network);
                ensure!(
                    !overlap,
                    "sites {} and {} overlap ({}/{} and {}/{})",
                    a.name,
                    b.name,
                    a.network,
                    a.prefix,
                    b.network,
                    b.prefix
                );
            }
        }
        let n = sites.len();
        let mut specs: Vec<Option<LinkSpec>> = vec![None; n * n];
        let index = |name: &str| {
            sites
                .iter()
                .position(|s| s.name == name)
                .ok_or_else(|| anyhow!("link names site {name:?}, which no --site gives"))
        };
        for link in links {
            let (from, to) = (index(&link.from)?, index(&link.to)?);
            specs[from * n + to] = Some(link.spec.clone());
            if link.both_ways {
                specs[to * n + from] = Some(link.spec.clone());
            }
        }
        let links = specs.into_iter().map(|s| s.map(Link::new)).collect();
        Ok(Topology { sites, links })
    }

    pub fn sites(&self) -> &[SiteSpec] {
        &self.sites
    }

    /// The link `packet` (an IP packet as read from the TUN device) crosses,
    /// as an index for [`Topology::link_mut`], if any.
    pub fn route(&self, packet: &[u8]) -> Option<usize> {
        let (src, dst) = ipv4_ends(packet)?;
        let from = self.site_of(src)?;
        let to = self.site_of(dst)?;
        let i = from * self.sites.len() + to;
        self.links[i].as_ref().map(|_| i)
    }

    pub fn link_mut(&mut self, i: usize) -> &mut Link {
        self.links[i].as_mut().expect("an index route() gave")
    }

    /// Every direction that has a link: (from site, to site, link).
    pub fn links(&self) -> impl Iterator<Item = (&str, &str, &Link)> {
        let n = self.sites.len();
        self.links.iter().enumerate().filter_map(move |(i, link)| {
            link.as_ref().map(|l| (self.sites[i / n].name.as_str(), self.sites[i % n].name.as_str(), l))
        })
    }

    fn site_of(&self, addr: Ipv4Addr) -> Option<usize> {
        self.sites.iter().position(|s| s.contains(addr))
    }
}

/// The source and destination of an IPv4 packet.
fn ipv4_ends(packet: &[u8]) -> Option<(Ipv4Addr, Ipv4Addr)> {
    if packet.len() < 20 || packet[0] >> 4 != 4 {
        return None;
    }
    let addr = |at: usize| Ipv4Addr::new(packet[at], packet[at + 1], packet[at + 2], packet[at + 3]);
    Some((addr(12), addr(16)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn packet(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p
    }

    fn three_sites(links: &[&str]) -> Result<Topology> {
        let sites = ["a=10.77.1.0/24", "b=10.77.2.0/24", "c=10.77.3.0/24"].map(|s| SiteSpec::parse(s).unwrap());
        let links: Vec<LinkArg> = links.iter().map(|l| LinkArg::parse(l).unwrap()).collect();
        Topology::new(sites.to_vec(), &links)
    }

    #[test]
    fn packets_take_the_link_between_their_sites() {
        let mut t = three_sites(&["a-b:rtt=10ms", "a>c:delay=7ms"]).unwrap();
        let ab = t.route(&packet([10, 77, 1, 1], [10, 77, 2, 3])).expect("a to b");
        let ba = t.route(&packet([10, 77, 2, 3], [10, 77, 1, 1])).expect("b to a");
        let ac = t.route(&packet([10, 77, 1, 1], [10, 77, 3, 1])).expect("a to c");
        assert_ne!(ab, ba);
        assert_eq!(t.link_mut(ab).spec().delay, Duration::from_millis(5));
        assert_eq!(t.link_mut(ac).spec().delay, Duration::from_millis(7));
        // No link back from c, none between b and c, none within a site,
        // and nothing for what is not IPv4 or outside every site.
        assert_eq!(t.route(&packet([10, 77, 3, 1], [10, 77, 1, 1])), None);
        assert_eq!(t.route(&packet([10, 77, 2, 1], [10, 77, 3, 1])), None);
        assert_eq!(t.route(&packet([10, 77, 1, 1], [10, 77, 1, 2])), None);
        assert_eq!(t.route(&packet([10, 9, 1, 1], [10, 77, 2, 2])), None);
        let mut v6 = packet([10, 77, 1, 1], [10, 77, 2, 3]);
        v6[0] = 0x60;
        assert_eq!(t.route(&v6), None);
        assert_eq!(t.route(&[0x45; 10]), None);
        assert_eq!(t.links().count(), 3);
    }

    #[test]
    fn a_later_link_overrides_an_earlier_one() {
        let mut t = three_sites(&["a-b:rtt=10ms", "b>a:rtt=40ms"]).unwrap();
        let ab = t.route(&packet([10, 77, 1, 1], [10, 77, 2, 3])).unwrap();
        let ba = t.route(&packet([10, 77, 2, 3], [10, 77, 1, 1])).unwrap();
        assert_eq!(t.link_mut(ab).spec().delay, Duration::from_millis(5));
        assert_eq!(t.link_mut(ba).spec().delay, Duration::from_millis(20));
    }

    #[test]
    fn bad_layouts_are_refused() {
        let e = three_sites(&["a-d:rtt=1ms"]).unwrap_err().to_string();
        assert!(e.contains("\"d\""), "{e}");
        let overlapping = ["a=10.77.0.0/16", "b=10.77.2.0/24"].map(|s| SiteSpec::parse(s).unwrap());
        assert!(Topology::new(overlapping.to_vec(), &[]).unwrap_err().to_string().contains("overlap"));
        let twice = ["a=10.1.0.0/16", "a=10.2.0.0/16"].map(|s| SiteSpec::parse(s).unwrap());
        assert!(Topology::new(twice.to_vec(), &[]).unwrap_err().to_string().contains("twice"));
        let one = [SiteSpec::parse("a=10.1.0.0/16").unwrap()];
        assert!(Topology::new(one.to_vec(), &[]).is_err());
    }
}
