//! One direction of a link between two sites: when each packet sent on it
//! arrives, or whether it is lost. Pure: the caller gives the time (in
//! nanoseconds since any fixed start) and the random source, so the model
//! is tested without a network and a seed replays a run's decisions.
//!
//! A packet first waits for the wire (the rate cap: a packet of `n` bytes
//! takes `8n / rate` seconds to send, after the ones queued before it), then
//! crosses it (the one-way delay, give or take the jitter). A packet that
//! would wait longer than `buffer` for the wire is dropped, as a router's
//! full queue drops it. Without `reorder`, a packet never arrives before
//! one sent earlier on the same link: a jittered delay shorter than the
//! previous packet's is stretched to it, as on a real path, where one
//! flow's packets follow one route through FIFO queues.

use std::time::Duration;

use rand::Rng;

/// How one direction of a link behaves.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    /// One-way delay (half the round trip of a symmetric link).
    pub delay: Duration,
    /// Each packet's delay is drawn uniformly from `delay ± jitter`.
    pub jitter: Duration,
    /// The share of packets lost, 0 to 1, each independently.
    pub loss: f64,
    /// The wire's rate in bits per second; none is unlimited.
    pub rate_bits: Option<u64>,
    /// The longest a packet waits for the wire before it is dropped.
    pub buffer: Duration,
    /// Packets may overtake each other (jitter alone then reorders them).
    pub reorder: bool,
}

impl Default for LinkSpec {
    fn default() -> Self {
        LinkSpec {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: 0.0,
            rate_bits: None,
            buffer: DEFAULT_BUFFER,
            reorder: false,
        }
    }
}

/// A router's queue of a few hundred milliseconds: long enough for TCP to
/// fill a capped link, short enough that a sender learns of congestion.
pub const DEFAULT_BUFFER: Duration = Duration::from_millis(200);

/// What became of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// It arrives at this time (ns).
    Arrives(u64),
    /// The link lost it (`loss`).
    Lost,
    /// The queue for the wire was full (`buffer`).
    Overflowed,
}

/// Counts of what a link did, for its summary line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounts {
    pub packets: u64,
    pub bytes: u64,
    pub lost: u64,
    pub overflowed: u64,
}

/// One direction of a link and the state its packets left.
#[derive(Debug)]
pub struct Link {
    spec: LinkSpec,
    /// When the wire is free for the next packet (ns).
    wire_free: u64,
    /// The latest arrival time given so far (ns), for FIFO order.
    last_arrival: u64,
    counts: LinkCounts,
}

impl Link {
    pub fn new(spec: LinkSpec) -> Link {
        assert!((0.0..=1.0).contains(&spec.loss), "loss {} is not a share", spec.loss);
        assert!(spec.rate_bits != Some(0), "a rate of zero sends nothing");
        Link { spec, wire_free: 0, last_arrival: 0, counts: LinkCounts::default() }
    }

    pub fn spec(&self) -> &LinkSpec {
        &self.spec
    }

    pub fn counts(&self) -> LinkCounts {
        self.counts
    }

    /// A packet of `bytes` is sent on this link at `now` (ns, never less
    /// than the `now` of an earlier call).
    pub fn send(&mut self, now: u64, bytes: usize, rng: &mut impl Rng) -> Fate {
        if self.spec.loss > 0.0 && rng.gen_bool(self.spec.loss) {
            self.counts.lost += 1;
            return Fate::Lost;
        }
        let start = now.max(self.wire_free);
        if start - now > nanos(self.spec.buffer) {
            self.counts.overflowed += 1;
            return Fate::Overflowed;
        }
        let sent = start + self.serialisation(bytes);
        self.wire_free = sent;
        let mut arrival = sent + self.delay(rng);
        if !self.spec.reorder {
            arrival = arrival.max(self.last_arrival);
        }
        self.last_arrival = self.last_arrival.max(arrival);
        self.counts.packets += 1;
        self.counts.bytes += bytes as u64;
        Fate::Arrives(arrival)
    }

    /// The time `bytes` take on the wire (ns).
    fn serialisation(&self, bytes: usize) -> u64 {
        match self.spec.rate_bits {
            Some(rate) => (bytes as u128 * 8 * 1_000_000_000 / rate as u128) as u64,
            None => 0,
        }
    }

    /// One packet's delay across the wire (ns).
    fn delay(&self, rng: &mut impl Rng) -> u64 {
        let delay = nanos(self.spec.delay);
        let jitter = nanos(self.spec.jitter);
        if jitter == 0 {
            return delay;
        }
        let offset = rng.gen_range(0..=2 * jitter);
        (delay + offset).saturating_sub(jitter)
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    const MS: u64 = 1_000_000;

    fn arrivals(spec: LinkSpec, sends: &[(u64, usize)], seed: u64) -> (Vec<Fate>, Link) {
        let mut link = Link::new(spec);
        let mut rng = StdRng::seed_from_u64(seed);
        let fates = sends.iter().map(|&(at, bytes)| link.send(at, bytes, &mut rng)).collect();
        (fates, link)
    }

    fn arrived(fate: Fate) -> u64 {
        match fate {
            Fate::Arrives(at) => at,
            other => panic!("expected an arrival, got {other:?}"),
        }
    }

    #[test]
    fn a_plain_delay_adds_to_every_packet() {
        let spec = LinkSpec { delay: Duration::from_millis(25), ..LinkSpec::default() };
        let (fates, link) = arrivals(spec, &[(0, 100), (3 * MS, 1500), (3 * MS, 60)], 1);
        assert_eq!(fates, [Fate::Arrives(25 * MS), Fate::Arrives(28 * MS), Fate::Arrives(28 * MS)]);
        assert_eq!(link.counts(), LinkCounts { packets: 3, bytes: 1660, lost: 0, overflowed: 0 });
    }

    #[test]
    fn the_rate_queues_packets_behind_each_other() {
        // 8 Mbit/s: 1000 bytes take 1 ms on the wire.
        let spec = LinkSpec { delay: Duration::from_millis(10), rate_bits: Some(8_000_000), ..LinkSpec::default() };
        let (fates, _) = arrivals(spec, &[(0, 1000), (0, 1000), (0, 1000), (10 * MS, 1000)], 1);
        let at: Vec<u64> = fates.into_iter().map(arrived).collect();
        assert_eq!(at, [11 * MS, 12 * MS, 13 * MS, 21 * MS]);
    }

    #[test]
    fn a_full_queue_drops_and_does_not_hold_the_wire() {
        // 1000 bytes take 1 ms; a 2.5 ms queue takes the first three sent at once.
        let spec = LinkSpec { rate_bits: Some(8_000_000), buffer: Duration::from_micros(2500), ..LinkSpec::default() };
        let (fates, link) = arrivals(spec, &[(0, 1000); 5], 1);
        assert_eq!(
            fates,
            [Fate::Arrives(MS), Fate::Arrives(2 * MS), Fate::Arrives(3 * MS), Fate::Overflowed, Fate::Overflowed]
        );
        assert_eq!(link.counts().overflowed, 2);
    }

    #[test]
    fn loss_is_near_its_share_and_replays_from_the_seed() {
        let spec = LinkSpec { loss: 0.05, ..LinkSpec::default() };
        let sends = vec![(0, 100); 20_000];
        let (fates, link) = arrivals(spec.clone(), &sends, 7);
        let lost = link.counts().lost as f64 / 20_000.0;
        // 20,000 draws at 5%: one standard deviation is 0.15%.
        assert!((0.044..=0.056).contains(&lost), "lost {lost}");
        let (again, _) = arrivals(spec, &sends, 7);
        assert_eq!(fates, again, "the same seed decides the same");
    }

    #[test]
    fn jitter_with_reordering_allowed_reorders() {
        let spec = LinkSpec {
            delay: Duration::from_millis(20),
            jitter: Duration::from_millis(5),
            reorder: true,
            ..LinkSpec::default()
        };
        let sends: Vec<(u64, usize)> = (0..1000).map(|i| (i * MS / 10, 100)).collect();
        let (fates, _) = arrivals(spec, &sends, 3);
        let at: Vec<u64> = fates.into_iter().map(arrived).collect();
        assert!(at.windows(2).any(|w| w[1] < w[0]), "no packet overtook another");
    }

    fn spec_strategy() -> impl Strategy<Value = LinkSpec> {
        (0u64..100, 0u64..20, 0.0f64..0.5, proptest::option::of(1_000_000u64..1_000_000_000), 1u64..500).prop_map(
            |(delay, jitter, loss, rate_bits, buffer)| LinkSpec {
                delay: Duration::from_millis(delay),
                jitter: Duration::from_millis(jitter),
                loss,
                rate_bits,
                buffer: Duration::from_millis(buffer),
                reorder: false,
            },
        )
    }

    proptest! {
        /// Without `reorder`, arrivals keep the order of sending, and none
        /// comes before its send time plus the delay less the jitter.
        #[test]
        fn fifo_and_bounds_hold(spec in spec_strategy(), gaps in proptest::collection::vec((0u64..5_000_000, 40usize..1500), 1..300), seed in any::<u64>()) {
            let mut now = 0;
            let sends: Vec<(u64, usize)> = gaps.iter().map(|&(gap, bytes)| { now += gap; (now, bytes) }).collect();
            let (fates, link) = arrivals(spec.clone(), &sends, seed);
            let floor = nanos(spec.delay).saturating_sub(nanos(spec.jitter));
            let mut last = 0;
            for (&(sent, _), fate) in sends.iter().zip(&fates) {
                if let Fate::Arrives(at) = *fate {
                    prop_assert!(at >= last, "arrived at {at} before an earlier packet's {last}");
                    prop_assert!(at >= sent + floor, "arrived at {at}, sent at {sent}, floor {floor}");
                    last = at;
                }
            }
            let c = link.counts();
            prop_assert_eq!(c.packets + c.lost + c.overflowed, sends.len() as u64);
        }

        /// With a rate cap, what arrives by any time never exceeds what the
        /// wire could carry since the first send.
        #[test]
        fn the_rate_is_never_exceeded(rate in 1_000_000u64..100_000_000, sizes in proptest::collection::vec(40usize..1500, 1..400)) {
            let spec = LinkSpec { rate_bits: Some(rate), buffer: Duration::from_secs(10), ..LinkSpec::default() };
            let sends: Vec<(u64, usize)> = sizes.iter().map(|&b| (0, b)).collect();
            let (fates, _) = arrivals(spec, &sends, 1);
            let mut bits = 0u128;
            for (&(_, bytes), fate) in sends.iter().zip(&fates) {
                bits += bytes as u128 * 8;
                let at = arrived(*fate) as u128;
                // Integer division rounds each packet's time down by under 1 ns.
                prop_assert!(bits * 1_000_000_000 <= (at + sends.len() as u128) * rate as u128);
            }
        }
    }
}
