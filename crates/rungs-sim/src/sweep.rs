//! `rungs-sim sweep` (`docs/rungs-sim.md`, "The sweep"): seeded random network conditions, every
//! policy on each, measured against the oracle (the best fixed timing in
//! hindsight, [`super::oracle`]) and the physical floor.
//!
//! Condition `i` of seed `s` is drawn from its own seed (as a soak game is), so a
//! condition can be replayed by itself: players 2–8; a base round trip per
//! player of 2–400 ms; jitter 0–80 ms; loss 0–8 %; in half of them one spike
//! of 0.5–10 s to 2–4 times the slowest path's round trip (at least 300 ms),
//! starting in the first half of the game; 30 or 60 fps; in a quarter of
//! them one player whose frame takes 20–50 ms (a slow CPU).

use super::game::{run_game, GameReport, GameSpec, Spike};
use super::oracle::{find_oracle, Oracle};
use super::SplitMix64;
use rungs_core::error::Result;
use rungs_core::timing::{PolicyKind, Timing};

/// The policies a sweep plays, the new one first; then the original games
/// (`ra`, `protocol0`, `protocol0-ts`), the delay a careful host sets from
/// the lobby (`lobby`), and `fixed:2/6` and `fixed:3/9`, what players set
/// by hand.
pub fn sweep_policies() -> Vec<PolicyKind> {
    let fixed = |s, l| PolicyKind::Fixed(Timing::new(s, l).unwrap_or(Timing::START));
    vec![
        PolicyKind::Tracking,
        PolicyKind::Adaptive,
        PolicyKind::RedAlert,
        PolicyKind::Protocol0,
        PolicyKind::Protocol0Ts,
        PolicyKind::Lobby,
        fixed(2, 6),
        fixed(3, 9),
    ]
}

/// The baselines the target compares the new policy with: every policy
/// players use today (`docs/baselines.md`).
pub fn is_baseline(policy: PolicyKind) -> bool {
    matches!(
        policy,
        PolicyKind::RedAlert
            | PolicyKind::Protocol0
            | PolicyKind::Protocol0Ts
            | PolicyKind::Lobby
            | PolicyKind::Fixed(_)
    )
}

/// Condition `index` of sweep `seed`, `frames` long.
pub fn sweep_condition(seed: u64, index: u32, frames: u32) -> GameSpec {
    let mut rng = SplitMix64::new(super::soak::game_seed(seed, index));
    let players = 2 + rng.below_or_equal(6) as u8;
    let fps = if rng.below_or_equal(1) == 0 { 30 } else { 60 };
    let mut spec = GameSpec::new(players, frames, fps, 60);
    spec.rtt_ms = (0..players)
        .map(|_| 2 + rng.below_or_equal(398) as u32)
        .collect();
    spec.jitter_ms = rng.below_or_equal(80) as u32;
    spec.loss_ppm = rng.below_or_equal(80_000) as u32;
    let game_ms = u64::from(frames) * 1000 / u64::from(fps);
    if rng.below_or_equal(1) == 0 {
        let slowest = spec.rtt_ms.iter().copied().max().unwrap_or(60);
        let factor = 2 + rng.below_or_equal(2) as u32;
        spec.spikes.push(Spike {
            rtt_ms: (slowest * factor).max(300),
            start_ms: game_ms / 8 + rng.below_or_equal(game_ms * 3 / 8),
            duration_ms: 500 + rng.below_or_equal(9_500),
            player: None,
        });
    }
    if rng.below_or_equal(3) == 0 {
        let slow = rng.below_or_equal(u64::from(players) - 1) as usize;
        let mut proc_us = vec![5000; usize::from(players)];
        proc_us[slow] = 20_000 + rng.below_or_equal(30_000) as u32;
        spec.proc_us = proc_us;
    }
    spec.seed = rng.next_u64();
    spec
}

/// Every policy and the oracle on one condition.
#[derive(Debug, Clone)]
pub struct SweepResult {
    pub spec: GameSpec,
    pub oracle: Option<Oracle>,
    /// One report per [`sweep_policies`] entry, in that order.
    pub reports: Vec<(PolicyKind, GameReport)>,
}

/// Play condition `index` with every policy and find its oracle.
pub fn run_condition(seed: u64, index: u32, frames: u32) -> Result<SweepResult> {
    let spec = sweep_condition(seed, index, frames);
    let mut reports = Vec::new();
    for policy in sweep_policies() {
        let mut game = spec.clone();
        game.policy = policy;
        reports.push((policy, run_game(&game)?));
    }
    let oracle = find_oracle(&spec)?;
    Ok(SweepResult {
        spec,
        oracle,
        reports,
    })
}

/// Stalled frames as a share of the frames, percent.
pub fn stall_percent(report: &GameReport) -> f64 {
    report.stall_frames as f64 * 100.0 / f64::from(report.frames.max(1))
}

/// Why a policy missed the target on a condition.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetMiss {
    /// Its stalls exceeded this allowance (percent of the frames):
    /// max(the fewest among the baselines, 0.5 %). `None` when within.
    pub stalls_over: Option<f64>,
    /// The baselines stalling on under 1 % whose mean latency it did not
    /// beat.
    pub not_faster_than: Vec<PolicyKind>,
}

impl SweepResult {
    /// The target for `policy` on this condition: its mean latency
    /// strictly below every baseline that stalls on under 1 % of the frames,
    /// and its stalls at most max(the fewest among the baselines, 0.5 %).
    pub fn meets_target(&self, policy: PolicyKind) -> bool {
        self.target_miss(policy).is_none()
    }

    /// How `policy` missed the target here, `None` when it met it (a policy
    /// the sweep did not play misses it with no reason to give).
    pub fn target_miss(&self, policy: PolicyKind) -> Option<TargetMiss> {
        let Some((_, own)) = self.reports.iter().find(|(p, _)| *p == policy) else {
            return Some(TargetMiss {
                stalls_over: None,
                not_faster_than: Vec::new(),
            });
        };
        let baselines = self.reports.iter().filter(|(p, _)| is_baseline(*p));
        let allowance = baselines
            .clone()
            .map(|(_, r)| stall_percent(r))
            .fold(f64::INFINITY, f64::min)
            .max(0.5);
        let miss = TargetMiss {
            stalls_over: (stall_percent(own) > allowance).then_some(allowance),
            not_faster_than: baselines
                .filter(|(_, r)| stall_percent(r) < 1.0)
                .filter(|(_, r)| own.latency_mean_ms >= r.latency_mean_ms)
                .map(|(p, _)| *p)
                .collect(),
        };
        (miss.stalls_over.is_some() || !miss.not_faster_than.is_empty()).then_some(miss)
    }

    /// The policies with the lowest mean latency among those stalling on at
    /// most 0.5 % of the frames (ties all win).
    pub fn winners(&self) -> Vec<PolicyKind> {
        let eligible = self.reports.iter().filter(|(_, r)| stall_percent(r) <= 0.5);
        let best = eligible
            .clone()
            .map(|(_, r)| r.latency_mean_ms)
            .fold(f64::INFINITY, f64::min);
        eligible
            .filter(|(_, r)| r.latency_mean_ms <= best)
            .map(|(p, _)| *p)
            .collect()
    }
}
