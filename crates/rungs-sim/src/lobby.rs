//! What a lobby measures before the game: a few pings between every pair of
//! players over the game's network as it is at the start (its base delays,
//! jitter, loss and reordering; the spikes and outages of the game itself
//! are still to come). The `lobby` baseline sets its fixed timing from them
//! ([`rungs_core::timing::baselines::lobby`]), and Red Alert starts from the
//! host's (`sim::classic`): nobody reads the simulator's exact parameters.
//!
//! Drawn from their own stream of the game's seed, so measuring the lobby
//! changes no draw of the game's network.

use super::SplitMix64;
use crate::game::spec::GameSpec;
use rungs_core::timing::baselines::{lobby::PINGS_PER_PAIR, ticks_at};

/// Mixed into the game's seed for the lobby's own stream.
const LOBBY_STREAM: u64 = 0x4c4f_4242_5950_494e;

/// Every pair's pings: the round trips that came back, µs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LobbyPings {
    /// `((a, b), round trips)` for `a < b`, in seat order.
    pairs: Vec<((u8, u8), Vec<u64>)>,
}

impl LobbyPings {
    /// The pings of `spec`'s lobby.
    pub fn measure(spec: &GameSpec) -> LobbyPings {
        let mut rng = SplitMix64::new(spec.seed ^ LOBBY_STREAM);
        let mut pairs = Vec::new();
        for a in 0..spec.players {
            for b in a + 1..spec.players {
                let samples = (0..PINGS_PER_PAIR)
                    .filter_map(|_| {
                        let there = one_way(spec, a, b, &mut rng)?;
                        let back = one_way(spec, b, a, &mut rng)?;
                        Some(there + back)
                    })
                    .collect();
                pairs.push(((a, b), samples));
            }
        }
        LobbyPings { pairs }
    }

    /// Every pair's round trips that came back, µs.
    pub fn pairs(&self) -> impl Iterator<Item = &[u64]> {
        self.pairs.iter().map(|(_, samples)| samples.as_slice())
    }

    /// `seat`'s own pings with every other player, µs: what its lobby
    /// shows it (the paths between two other players it does not see).
    pub fn pairs_of(&self, seat: u8) -> impl Iterator<Item = &[u64]> {
        self.pairs
            .iter()
            .filter(move |((a, b), _)| *a == seat || *b == seat)
            .map(|(_, samples)| samples.as_slice())
    }

    /// The host's (`seat`'s) global channel response time, whole ticks: the
    /// mean of the ticks its pings with every other player took
    /// (`Global_Response_Time`), 0 when none came back.
    pub fn response_ticks_of(&self, seat: u8) -> u32 {
        let ticks: Vec<u64> = self
            .pairs_of(seat)
            .flat_map(|samples| samples.iter().map(|us| ticks_at(*us)))
            .collect();
        if ticks.is_empty() {
            return 0;
        }
        (ticks.iter().sum::<u64>() / ticks.len() as u64) as u32
    }
}

/// One ping's trip from `from` to `to`, µs, or `None` when it is lost.
fn one_way(spec: &GameSpec, from: u8, to: u8, rng: &mut SplitMix64) -> Option<u64> {
    let conditions = spec.path_conditions(from, to, 0);
    if rng.chance_ppm(conditions.loss_ppm) {
        return None;
    }
    let mut delay = conditions.delay_us + rng.below_or_equal(conditions.jitter_us);
    if rng.chance_ppm(conditions.reorder_ppm) {
        delay += rng.below_or_equal(conditions.reorder_extra_us);
    }
    Some(delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lobby_measures_every_pair_with_the_networks_jitter_and_loss() {
        let mut spec = GameSpec::new(3, 900, 30, 100);
        spec.rtt_ms = vec![100, 100, 300];
        let calm = LobbyPings::measure(&spec);
        let pairs: Vec<&[u64]> = calm.pairs().collect();
        assert_eq!(pairs.len(), 3);
        assert_eq!(pairs[0], &[100_000; PINGS_PER_PAIR][..]);
        assert_eq!(pairs[1], &[200_000; PINGS_PER_PAIR][..]);
        // 100 ms to seat 1, 200 to seat 2: 6 and 12 ticks.
        assert_eq!(calm.response_ticks_of(0), 9);

        spec.jitter_ms = 40;
        spec.loss_ppm = 300_000;
        let rough = LobbyPings::measure(&spec);
        let samples: Vec<u64> = rough.pairs().flatten().copied().collect();
        assert!(samples.len() < 3 * PINGS_PER_PAIR, "some pings are lost");
        assert!(samples
            .iter()
            .all(|us| { (100_000..=280_000).contains(us) }));
        assert!(samples.iter().any(|us| *us % 100_000 != 0), "jitter shows");
        assert_eq!(
            rough,
            LobbyPings::measure(&spec),
            "the same seed, the same pings"
        );
    }
}
