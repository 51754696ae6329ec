//! The oracle (`docs/rungs-sim.md`, "The sweep"): the best fixed timing in hindsight for one game —
//! the lowest mean latency among fixed timings `S/L` (`L % S == 0`, below
//! `1/4` and between rungs included) whose stalls stay at or below 0.5 % of
//! the frames — found by playing the candidates on the same seeded network.
//!
//! The candidate set is bounded so that it costs a few dozen games, not
//! thousands:
//! - send periods 1 to [`ORACLE_MAX_SEND_PERIOD`] (a longer send period only
//!   adds to the latency a look-ahead already pays; with the same `L` a
//!   shorter period is never slower to execute);
//! - for each send period, the smallest look-ahead (a multiple of `S`, at
//!   most 250) that stalls at most 0.5 % is that period's candidate: longer
//!   look-aheads with the same period only add latency. It is found by
//!   galloping up from one step below the base one-way delay of the slowest
//!   path in frames (below that every frame waits for the network), then
//!   halving the gap: about `2 log2(250 / S)` games per period at worst.
//!
//! The search assumes stalls do not come back with a longer look-ahead; a
//! longer look-ahead only gives each turn more time to arrive, so the
//! assumption is the lockstep model's own (the oracle is "best found", and
//! a fixed timing the search skipped could in principle do better).

use super::game::{run_game, GameReport, GameSpec};
use rungs_core::error::Result;
use rungs_core::timing::{PolicyKind, Timing, MAX_LOOK_AHEAD};

/// The longest send period the oracle tries.
pub const ORACLE_MAX_SEND_PERIOD: u8 = 6;
/// Stalls the oracle accepts: at most this many per thousand frames.
pub const ORACLE_STALL_PER_MILLE: u64 = 5;

/// The best fixed timing for one game.
#[derive(Debug, Clone)]
pub struct Oracle {
    pub timing: Timing,
    /// The game played at that timing.
    pub report: GameReport,
    /// How many fixed timings were played to find it.
    pub games_played: u32,
}

/// Whether `report` stalls on at most 0.5 % of its frames.
pub fn stalls_within_oracle_bound(report: &GameReport) -> bool {
    report.stall_frames * 1000 <= u64::from(report.frames) * ORACLE_STALL_PER_MILLE
}

/// The best fixed timing for `spec` (its policy is ignored), or `None` if no
/// candidate keeps stalls at or below 0.5 %.
pub fn find_oracle(spec: &GameSpec) -> Result<Option<Oracle>> {
    let slowest_one_way_us = (0..spec.players)
        .flat_map(|a| (0..spec.players).map(move |b| (a, b)))
        .filter(|(a, b)| a != b)
        .map(|(a, b)| spec.one_way_us(a, b, 0))
        .max()
        .unwrap_or(0);
    let one_way_frames = slowest_one_way_us * u64::from(spec.fps) / 1_000_000;
    let mut best: Option<Oracle> = None;
    let mut games_played = 0;
    let mut play = |send_period: u8, steps: u64| -> Result<(Timing, GameReport)> {
        let look_ahead = (steps * u64::from(send_period)).min(u64::from(MAX_LOOK_AHEAD));
        let timing = Timing::new(send_period, look_ahead as u8)?;
        let mut candidate = spec.clone();
        candidate.policy = PolicyKind::Fixed(timing);
        games_played += 1;
        Ok((timing, run_game(&candidate)?))
    };
    for send_period in 1..=ORACLE_MAX_SEND_PERIOD {
        let step = u64::from(send_period);
        let most = u64::from(MAX_LOOK_AHEAD) / step;
        // Look-aheads in steps of the send period: gallop up from one step
        // below the one-way delay until one holds, then halve the gap.
        let mut low = (one_way_frames / step).saturating_sub(1).max(1);
        let mut found: Option<(u64, Timing, GameReport)> = None;
        let mut jump = 1;
        let mut probe = low;
        loop {
            let (timing, report) = play(send_period, probe)?;
            if stalls_within_oracle_bound(&report) {
                found = Some((probe, timing, report));
                break;
            }
            low = probe + 1;
            if probe >= most {
                break;
            }
            probe = (probe + jump).min(most);
            jump *= 2;
        }
        let Some((mut high, mut timing, mut report)) = found else {
            continue;
        };
        while low < high {
            let middle = low + (high - low) / 2;
            let (t, r) = play(send_period, middle)?;
            if stalls_within_oracle_bound(&r) {
                (high, timing, report) = (middle, t, r);
            } else {
                low = middle + 1;
            }
        }
        let better = best
            .as_ref()
            .map_or(true, |b| report.latency_mean_ms < b.report.latency_mean_ms);
        if better {
            best = Some(Oracle {
                timing,
                report,
                games_played: 0,
            });
        }
    }
    Ok(best.map(|mut oracle| {
        oracle.games_played = games_played;
        oracle
    }))
}
