//! `lobby`: the fixed timing a careful host sets by hand from what the
//! lobby shows before the game, and keeps for the whole game.
//!
//! The rule, using only what a lobby measures — a few pings between every
//! pair of players, some of them lost:
//! 1. per pair, the median `m` of the round trips that came back and their
//!    spread `s` above it, the 90th percentile less the median;
//! 2. the round trip to cover is the worst pair's `m + 2s` (two spreads
//!    above the median: a jittery path's one-way delay reaches about half
//!    of that);
//! 3. a packet every frame (send period 1), and a look-ahead of half that
//!    round trip in whole frames at the game speed, rounded up, plus one
//!    frame of margin (for a lost packet's copy in the next one, and the
//!    frame boundary).
//!
//! It cannot know what the game will bring: a spike, a slow machine's
//! frames, loss the pings did not show.

use super::super::ladder::{Timing, MAX_LOOK_AHEAD};

/// Pings a lobby takes between each pair before the game.
pub const PINGS_PER_PAIR: usize = 10;
/// Frames of margin a careful host adds.
pub(crate) const MARGIN_FRAMES: u32 = 1;

/// The round trip a pair's pings ask to cover, µs: `m + 2s` of the
/// samples that came back (`None` when none did).
pub(crate) fn round_trip_to_cover_us(samples_us: &[u64]) -> Option<u64> {
    if samples_us.is_empty() {
        return None;
    }
    let mut sorted = samples_us.to_vec();
    sorted.sort_unstable();
    let last = sorted.len() - 1;
    let median = sorted[last / 2];
    let p90 = sorted[last * 9 / 10];
    Some(median + 2 * (p90 - median))
}

/// The timing the host sets at `fps` from every pair's pings (round
/// trips in µs that came back); `3/9` when no ping came back at all.
pub fn lobby_timing<'a>(pairs: impl IntoIterator<Item = &'a [u64]>, fps: u8) -> Timing {
    let Some(cover_us) = pairs.into_iter().filter_map(round_trip_to_cover_us).max() else {
        return Timing::FALLBACK;
    };
    let one_way_frames = (cover_us / 2 * u64::from(fps.max(1))).div_ceil(1_000_000);
    let look_ahead =
        (one_way_frames + u64::from(MARGIN_FRAMES)).clamp(1, u64::from(MAX_LOOK_AHEAD));
    Timing::new(1, look_ahead as u8).unwrap_or(Timing::FALLBACK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_pairs_median_and_two_spreads_half_way_plus_a_frame() {
        // 100 ms, steady: 50 ms one way is 1.5 frames at 30 fps -> 2, +1.
        let steady = [100_000u64; 10];
        assert_eq!(lobby_timing([&steady[..]], 30).to_string(), "1/3");
        // A jittery pair: median 140, p90 180 -> cover 220 ms, 110 one way:
        // 3.3 frames -> 4, +1.
        let jittery: Vec<u64> = (0..10)
            .map(|i| [100, 120, 130, 140, 140, 140, 150, 160, 180, 190][i] * 1000)
            .collect();
        assert_eq!(round_trip_to_cover_us(&jittery), Some(220_000));
        assert_eq!(
            lobby_timing([&steady[..], &jittery[..]], 30).to_string(),
            "1/5"
        );
        assert_eq!(lobby_timing([&jittery[..]], 60).to_string(), "1/8");
        // A LAN: a frame of margin.
        assert_eq!(lobby_timing([&[2_000u64; 10][..]], 30).to_string(), "1/2");
        // Lost pings are not samples; nothing came back at all: 3/9.
        assert_eq!(lobby_timing([&[][..]], 30), Timing::FALLBACK);
    }
}
