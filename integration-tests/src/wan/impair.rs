//! What the link does wrong, per direction: random loss, duplication, corruption and
//! reordering, drawn from a seeded generator so that a run can be repeated.
//!
//! The decisions for one direction are a pure function of the seed, the settings and how many
//! packets that direction has read: the n-th packet gets the same fate in every run with the
//! same seed. (Which bytes the n-th packet carries still depends on the kernels' timing.)
//! Every packet draws the same number of values whatever happens to it, so switching one
//! impairment on or off does not change the others' decisions.
//!
//! The forwarder draws a fate for every packet it reads and applies it on the line after the
//! bottleneck queue, to the packets the queue admitted: a lost packet has used its slot on the
//! bottleneck, a duplicate's copy takes none, and every corrupted or held-back packet counted
//! reaches the far side.
//!
//! Compared with netem, whose vocabulary this borrows:
//! - Correlation is a Markov chain: with probability `correlation` a packet repeats the
//!   previous packet's decision, otherwise it gets a fresh draw at `rate`. The long-run rate
//!   stays `rate` and consecutive decisions have correlation coefficient `correlation`.
//!   netem instead averages the uniform draws (`u = (1-ρ)·v + ρ·u_prev`), which also pulls
//!   the effective rate towards 50 %: by that formula 1 % at 25 % correlation happens to
//!   about one packet in 400,000.
//! - A packet chosen for reordering is *held back* by `reorder_gap` after its normal due
//!   time, so packets behind it overtake it. netem sends the chosen packet *early* (without
//!   its delay), so it overtakes the packets ahead of it, and its `gap` counts packets. Holding
//!   back keeps the emulated propagation delay a floor for every packet, which an RTT
//!   emulator needs; either way the receiver sees a hole that later packets fill around.
//! - Corruption changes one byte after the IP header (in the TCP header or payload), so the
//!   receiving kernel drops the packet on the TCP checksum rather than the IP one, and TCP
//!   recovers it as a loss. netem flips a bit anywhere in the packet, IP header included.
//! - Order of effects, as in netem: loss first (a lost packet is never duplicated); then
//!   duplication, whose copy is clean and on time; then corruption and reordering of the
//!   original.

use std::time::Duration;

/// How often something happens to a packet, and how strongly consecutive packets' fates agree.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Chance {
    /// Long-run fraction of packets affected, in [0, 1]: 0.01 for 1 %.
    pub rate: f64,
    /// In [0, 1): the probability that a packet repeats the previous packet's decision
    /// instead of drawing afresh. 0 makes decisions independent; 0.25 makes runs of affected
    /// (and unaffected) packets longer, like netem's `loss 1% 25%`.
    pub correlation: f64,
}

impl Chance {
    /// Independent decisions at `rate`.
    pub const fn rate(rate: f64) -> Chance {
        Chance { rate, correlation: 0.0 }
    }

    /// Decisions at `rate` with the given correlation between consecutive packets.
    pub const fn correlated(rate: f64, correlation: f64) -> Chance {
        Chance { rate, correlation }
    }

    fn validate(&self, what: &str) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.rate) {
            return Err(format!("{what}.rate {} is not in [0, 1]", self.rate));
        }
        if !(0.0..1.0).contains(&self.correlation) {
            return Err(format!("{what}.correlation {} is not in [0, 1)", self.correlation));
        }
        Ok(())
    }
}

/// The impairments of one direction. The default does nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Impairments {
    /// Packets dropped before the bottleneck (counted in `DirectionStats::lost`).
    pub loss: Chance,
    /// Packets delivered twice: a clean copy goes through the bottleneck right after the
    /// original (`DirectionStats::duplicated`).
    pub duplicate: Chance,
    /// Packets with one byte after the IP header changed (`DirectionStats::corrupted`).
    /// Packets with nothing after the IP header are left alone and not counted.
    pub corrupt: Chance,
    /// Packets held back by `reorder_gap` so later ones overtake them
    /// (`DirectionStats::reordered`).
    pub reorder: Chance,
    /// How long past its due time a packet chosen for reordering is held back, like the
    /// 100 ms of "reordering 1 % (gap 100 ms, correlation 10 %)". Must be non-zero when
    /// `reorder.rate` is.
    pub reorder_gap: Duration,
}

impl Impairments {
    /// Whether any packet can be held back, which needs a second writer thread.
    pub fn reorders(&self) -> bool {
        self.reorder.rate > 0.0
    }

    /// Every problem with these settings, prefixed with `direction`.
    pub(super) fn validate(&self, direction: &str) -> Result<(), String> {
        self.loss.validate(&format!("{direction}.loss"))?;
        self.duplicate.validate(&format!("{direction}.duplicate"))?;
        self.corrupt.validate(&format!("{direction}.corrupt"))?;
        self.reorder.validate(&format!("{direction}.reorder"))?;
        if self.reorders() && self.reorder_gap.is_zero() {
            return Err(format!("{direction}.reorder needs a non-zero reorder_gap"));
        }
        Ok(())
    }
}

/// The impairments of both directions and the seed they are drawn from. The default does
/// nothing (and `WanLink::start` uses it).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WanImpairments {
    /// Seed of the decisions; each direction derives its own stream from it.
    pub seed: u64,
    /// Server namespace → client namespace (result sets, bulk downloads).
    pub server_to_client: Impairments,
    /// Client namespace → server namespace (queries, ACKs).
    pub client_to_server: Impairments,
}

impl WanImpairments {
    /// The same impairments in both directions, drawn independently from `seed`.
    pub fn both(seed: u64, impairments: Impairments) -> WanImpairments {
        WanImpairments { seed, server_to_client: impairments, client_to_server: impairments }
    }

    pub(super) fn validate(&self) -> Result<(), String> {
        self.server_to_client.validate("server_to_client")?;
        self.client_to_server.validate("client_to_server")
    }
}

/// What happens to one packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fate {
    /// Drop it; nothing else applies.
    pub lose: bool,
    /// Also send a clean copy right after it.
    pub duplicate: bool,
    /// Change a byte: `(where, mask)`, a position after the IP header and a non-zero XOR
    /// mask. `None` also when the packet has nothing after its IP header.
    pub corrupt: Option<(usize, u8)>,
    /// Hold it back by the gap.
    pub reorder: bool,
}

/// SplitMix64 (Steele, Lea & Flood 2014): tiny, passes BigCrush, and any seed (0 included)
/// is a good one. Reproducibility matters here, not cryptographic strength.
#[derive(Clone, Debug)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// One correlated yes/no stream (see the module doc).
#[derive(Clone, Debug, Default)]
struct Chain {
    last: bool,
}

impl Chain {
    /// One decision from one uniform draw `u`: below `correlation` repeats the last decision;
    /// otherwise `(u - ρ) / (1 - ρ)`, again uniform in [0, 1), is compared with the rate.
    fn decide(&mut self, chance: Chance, u: f64) -> bool {
        if chance.rate <= 0.0 {
            // Never, whatever the correlation: the chain starts at "no" and stays there.
            self.last = false;
        } else if u >= chance.correlation {
            self.last = (u - chance.correlation) / (1.0 - chance.correlation) < chance.rate;
        }
        self.last
    }
}

/// The decision maker of one direction.
#[derive(Clone, Debug)]
pub struct Impairer {
    settings: Impairments,
    rng: SplitMix64,
    loss: Chain,
    duplicate: Chain,
    corrupt: Chain,
    reorder: Chain,
}

impl Impairer {
    /// Decisions for `settings`, from the stream `stream` (one per direction) of `seed`.
    pub fn new(settings: Impairments, seed: u64, stream: u64) -> Impairer {
        // Two seeds that differ in one bit, or two streams of one seed, must not give
        // overlapping sequences: mix them through a generator step first.
        let mut mix = SplitMix64(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
        let rng = SplitMix64(mix.next());
        Impairer {
            settings,
            rng,
            loss: Chain::default(),
            duplicate: Chain::default(),
            corrupt: Chain::default(),
            reorder: Chain::default(),
        }
    }

    /// The settings the decisions follow.
    pub fn settings(&self) -> &Impairments {
        &self.settings
    }

    /// Whether these settings can ever do anything (if not, the forwarder skips the draws).
    pub fn is_active(&self) -> bool {
        let s = &self.settings;
        [s.loss, s.duplicate, s.corrupt, s.reorder].iter().any(|c| c.rate > 0.0)
    }

    /// The fate of the next packet, `packet` being its bytes (IPv4 or IPv6).
    pub fn next(&mut self, packet: &[u8]) -> Fate {
        let s = self.settings;
        // Always five draws, in this order, whatever the outcome (see the module doc).
        let lose = self.loss.decide(s.loss, self.rng.uniform());
        let duplicate = self.duplicate.decide(s.duplicate, self.rng.uniform());
        let corrupt = self.corrupt.decide(s.corrupt, self.rng.uniform());
        let reorder = self.reorder.decide(s.reorder, self.rng.uniform());
        let spot = self.rng.next();
        if lose {
            return Fate { lose, ..Fate::default() };
        }
        let corrupt = if corrupt { corruption_at(packet, spot) } else { None };
        Fate { lose, duplicate, corrupt, reorder }
    }
}

/// A byte after the IP header and a non-zero mask for it, both taken from `spot`; `None` when
/// the packet has no bytes after its header (or is not IP). Extension headers of IPv6 count
/// as payload: corrupting them is caught too, by the receiving stack if not by TCP.
fn corruption_at(packet: &[u8], spot: u64) -> Option<(usize, u8)> {
    let header = match packet.first()? >> 4 {
        4 => usize::from(packet[0] & 0x0f) * 4,
        6 => 40,
        _ => return None,
    };
    let after = packet.len().checked_sub(header).filter(|&n| n > 0)?;
    let offset = header + (spot % after as u64) as usize;
    // The high bits choose the mask: 1..=255, so the byte always changes. A one's-complement
    // checksum catches every change confined to one byte, so the receiver always drops it.
    let mask = 1 + ((spot >> 56) % 255) as u8;
    Some((offset, mask))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1500-byte IPv4 packet with a 20-byte header.
    fn ipv4() -> Vec<u8> {
        let mut p = vec![0u8; 1500];
        p[0] = 0x45;
        p
    }

    fn run(settings: Impairments, seed: u64, n: usize) -> Vec<Fate> {
        let mut imp = Impairer::new(settings, seed, 0);
        let p = ipv4();
        (0..n).map(|_| imp.next(&p)).collect()
    }

    fn count(fates: &[Fate], f: impl Fn(&Fate) -> bool) -> usize {
        fates.iter().filter(|x| f(x)).count()
    }

    /// Fraction of consecutive pairs that agree, turned into the lag-1 correlation of a 0/1
    /// series with mean `p`.
    fn lag1_correlation(series: &[bool]) -> f64 {
        let n = series.len() as f64;
        let p = series.iter().filter(|&&b| b).count() as f64 / n;
        let both = series.windows(2).filter(|w| w[0] && w[1]).count() as f64 / (n - 1.0);
        (both - p * p) / (p * (1.0 - p))
    }

    #[test]
    fn default_does_nothing_and_is_inactive() {
        let fates = run(Impairments::default(), 1, 10_000);
        assert!(fates.iter().all(|f| *f == Fate::default()));
        assert!(!Impairer::new(Impairments::default(), 1, 0).is_active());
        let gap_only = Impairments { reorder_gap: Duration::from_millis(5), ..Impairments::default() };
        assert!(!Impairer::new(gap_only, 1, 0).is_active());
    }

    #[test]
    fn rates_land_in_a_binomial_band() {
        let n = 200_000;
        let s = Impairments {
            loss: Chance::rate(0.01),
            duplicate: Chance::rate(0.02),
            corrupt: Chance::rate(0.03),
            reorder: Chance::rate(0.04),
            reorder_gap: Duration::from_millis(1),
        };
        let fates = run(s, 42, n);
        let lost = count(&fates, |f| f.lose);
        // Duplication and the others apply only to packets that survive the loss.
        let survivors = (n - lost) as f64;
        for (what, got, rate, of) in [
            ("loss", lost, 0.01, n as f64),
            ("duplicate", count(&fates, |f| f.duplicate), 0.02, survivors),
            ("corrupt", count(&fates, |f| f.corrupt.is_some()), 0.03, survivors),
            ("reorder", count(&fates, |f| f.reorder), 0.04, survivors),
        ] {
            let (mean, sd) = (of * rate, (of * rate * (1.0 - rate)).sqrt());
            assert!(
                (got as f64 - mean).abs() < 5.0 * sd,
                "{what}: {got} of {of}, expected {mean:.0} ± {:.0}",
                5.0 * sd
            );
        }
    }

    #[test]
    fn correlation_keeps_the_rate_and_correlates_neighbours() {
        let n = 400_000;
        let s = Impairments {
            reorder: Chance::correlated(0.05, 0.25),
            reorder_gap: Duration::from_millis(1),
            ..Default::default()
        };
        let series: Vec<bool> = run(s, 7, n).iter().map(|f| f.reorder).collect();
        let rate = series.iter().filter(|&&b| b).count() as f64 / n as f64;
        // The variance of a sum grows by (1+ρ)/(1-ρ) under this chain.
        let sd = (0.05 * 0.95 / n as f64 * 1.25 / 0.75).sqrt();
        assert!((rate - 0.05).abs() < 5.0 * sd, "rate {rate}");
        let rho = lag1_correlation(&series);
        assert!((rho - 0.25).abs() < 0.03, "lag-1 correlation {rho}");
        let independent: Vec<bool> =
            run(Impairments { reorder: Chance::rate(0.05), ..s }, 7, n).iter().map(|f| f.reorder).collect();
        assert!(lag1_correlation(&independent).abs() < 0.02);
    }

    #[test]
    fn same_seed_same_fates_other_seed_or_stream_other_fates() {
        let s = Impairments { loss: Chance::rate(0.1), corrupt: Chance::rate(0.1), ..Default::default() };
        assert_eq!(run(s, 99, 5_000), run(s, 99, 5_000));
        assert_ne!(run(s, 99, 5_000), run(s, 100, 5_000));
        let p = ipv4();
        let mut a = Impairer::new(s, 99, 0);
        let mut b = Impairer::new(s, 99, 1);
        let a: Vec<Fate> = (0..5_000).map(|_| a.next(&p)).collect();
        let b: Vec<Fate> = (0..5_000).map(|_| b.next(&p)).collect();
        assert_ne!(a, b, "the two directions must draw different streams");
    }

    #[test]
    fn one_impairment_does_not_shift_another() {
        let loss_only = Impairments { loss: Chance::rate(0.05), ..Default::default() };
        let with_dup = Impairments { duplicate: Chance::rate(0.3), ..loss_only };
        let a: Vec<bool> = run(loss_only, 5, 5_000).iter().map(|f| f.lose).collect();
        let b: Vec<bool> = run(with_dup, 5, 5_000).iter().map(|f| f.lose).collect();
        assert_eq!(a, b);
    }

    #[test]
    fn lost_packets_get_nothing_else() {
        let all = Impairments {
            loss: Chance::rate(0.5),
            duplicate: Chance::rate(1.0),
            corrupt: Chance::rate(1.0),
            reorder: Chance::rate(1.0),
            reorder_gap: Duration::from_millis(1),
        };
        for f in run(all, 3, 1_000) {
            if f.lose {
                assert_eq!(f, Fate { lose: true, ..Fate::default() });
            } else {
                assert!(f.duplicate && f.corrupt.is_some() && f.reorder);
            }
        }
    }

    #[test]
    fn corruption_stays_after_the_ip_header() {
        let mut p = ipv4();
        p[0] = 0x46; // 24-byte header (one option word)
        for spot in (0..10_000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)) {
            let (at, mask) = corruption_at(&p, spot).expect("room to corrupt");
            assert!((24..1500).contains(&at), "offset {at}");
            assert_ne!(mask, 0);
        }
        let mut v6 = vec![0u8; 100];
        v6[0] = 0x60;
        assert!(corruption_at(&v6, 12345).is_some_and(|(at, _)| at >= 40));
        // Nothing after the header, or not IP at all: nothing to corrupt.
        assert_eq!(corruption_at(&p[..24], 1), None);
        assert_eq!(corruption_at(&[0x10, 0, 0, 0], 1), None);
        assert_eq!(corruption_at(&[], 1), None);
    }

    #[test]
    fn validation_names_the_bad_setting() {
        let bad_rate = WanImpairments {
            client_to_server: Impairments { loss: Chance::rate(1.5), ..Default::default() },
            ..Default::default()
        };
        assert!(bad_rate.validate().unwrap_err().contains("client_to_server.loss.rate"));
        let bad_corr =
            WanImpairments::both(0, Impairments { corrupt: Chance::correlated(0.1, 1.0), ..Default::default() });
        assert!(bad_corr.validate().unwrap_err().contains("server_to_client.corrupt.correlation"));
        let nan = WanImpairments::both(0, Impairments { duplicate: Chance::rate(f64::NAN), ..Default::default() });
        assert!(nan.validate().is_err());
        let no_gap = WanImpairments::both(0, Impairments { reorder: Chance::rate(0.01), ..Default::default() });
        assert!(no_gap.validate().unwrap_err().contains("reorder_gap"));
        assert_eq!(WanImpairments::default().validate(), Ok(()));
    }
}
