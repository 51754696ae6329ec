//! What a game is: its players, their network and machines, the policy,
//! the frames, the faults — and the paths and configurations that follow
//! from them. Nothing here runs; [`super::host`] plays it.

use crate::faults::{Fault, TimedFault};
use crate::{Conditions, SplitMix64};
use rungs_core::error::{Error, Result};
use rungs_core::report::MAX_SEATS;
use rungs_core::timing::PolicyKind;

/// Frames between state checksums (S10's checksum idea, carried by the turns).
pub(super) const CHECKSUM_INTERVAL: u32 = 64;
/// Global time at which the first frame may run, µs: before it the links
/// and clocks settle.
pub(super) const GAME_START_US: u64 = 1_000_000;

/// The wait before a player's next command, µs: uniform in `[0, 2 * mean]`
/// for `per_minute` commands a minute on average.
pub(crate) fn next_gap(rng: &mut SplitMix64, per_minute: u32) -> u64 {
    if per_minute == 0 {
        return u64::MAX / 4;
    }
    // Uniform in [0, 2 * mean]: mean gap 60 s / rate.
    let mean_us = 60_000_000 / u64::from(per_minute);
    rng.below_or_equal(2 * mean_us)
}

/// A change of round trip for a while.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spike {
    /// The round trip during the spike, ms.
    pub rtt_ms: u32,
    /// When it starts, ms after the game starts.
    pub start_ms: u64,
    /// How long it lasts, ms.
    pub duration_ms: u64,
    /// Only this player's paths; `None` for every path.
    pub player: Option<u8>,
}

/// How a player leaves mid-game.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Departure {
    /// The player quits: its removal is a command (graceful).
    Quit,
    /// The machine vanishes; the others drop it after the link is lost.
    Crash,
}

/// One game to simulate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GameSpec {
    pub players: u8,
    pub frames: u32,
    pub fps: u8,
    /// Base round trip per player, ms (one value applies to all).
    pub rtt_ms: Vec<u32>,
    pub jitter_ms: u32,
    /// Loss probability, parts per million.
    pub loss_ppm: u32,
    pub spikes: Vec<Spike>,
    /// Processing time per frame per player, µs (one value applies to all).
    pub proc_us: Vec<u32>,
    pub policy: PolicyKind,
    pub seed: u64,
    /// A player leaving on a frame.
    pub departure: Option<(u8, u32, Departure)>,
    /// Commands per player per minute, on average.
    pub commands_per_minute: u32,
    /// A seat whose simulated state goes wrong from a frame on (its engine
    /// has a bug): the checksums must catch it as a desync.
    pub diverge: Option<(u8, u32)>,
    /// Injected faults (see [`crate::faults`]).
    pub faults: Vec<Fault>,
    /// Duplication and reordering probabilities, parts per million.
    pub duplicate_ppm: u32,
    pub reorder_ppm: u32,
    /// Windows in which a player's paths (or every path) carry nothing.
    pub outages: Vec<OutageSpec>,
    /// Crashes and quits at moments of game time (see [`TimedFault`]).
    pub timed_faults: Vec<TimedFault>,
    /// The liveness timeout every machine configures, ms. A machine
    /// unheard for this long is dropped, so a game that must ride out an
    /// outage sets it longer than the outage; `None`: 2 s longer than the
    /// longest outage when there is one (the engines know their network),
    /// else rungs' adaptive default.
    pub liveness_timeout_ms: Option<u64>,
    /// The engines drop vanished players themselves
    /// (`LockstepConfig::manual_drops`): each drops a player whose link is
    /// lost once that machine is really gone.
    pub manual_drops: bool,
}

/// A window in which nothing gets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutageSpec {
    /// When it starts, ms after the game starts.
    pub start_ms: u64,
    /// How long it lasts, ms.
    pub duration_ms: u64,
    /// Only this player's paths (both directions); `None` for every path.
    pub player: Option<u8>,
}

impl GameSpec {
    /// A game of `players` at `fps` for `frames`, everyone at `rtt_ms`.
    pub fn new(players: u8, frames: u32, fps: u8, rtt_ms: u32) -> GameSpec {
        GameSpec {
            players,
            frames,
            fps,
            rtt_ms: vec![rtt_ms],
            jitter_ms: 0,
            loss_ppm: 0,
            spikes: Vec::new(),
            proc_us: vec![5000],
            policy: PolicyKind::Adaptive,
            seed: 1,
            departure: None,
            commands_per_minute: 120,
            diverge: None,
            faults: Vec::new(),
            duplicate_ppm: 0,
            reorder_ppm: 0,
            outages: Vec::new(),
            timed_faults: Vec::new(),
            liveness_timeout_ms: None,
            manual_drops: false,
        }
    }

    /// The liveness timeout the machines configure, ms (see
    /// [`liveness_timeout_ms`](Self::liveness_timeout_ms)); `None`: rungs'
    /// default.
    pub fn liveness_timeout_ms(&self) -> Option<u64> {
        let longest_outage = self.outages.iter().map(|o| o.duration_ms).max();
        self.liveness_timeout_ms
            .or(longest_outage.map(|ms| ms + 2_000))
    }

    /// The departure and the faults, as one list.
    pub(super) fn all_faults(&self) -> Vec<Fault> {
        let mut all = self.faults.clone();
        if let Some((seat, frame, how)) = self.departure {
            all.push(match how {
                Departure::Quit => Fault::Quit { seat, frame },
                Departure::Crash => Fault::Crash {
                    seat,
                    frame,
                    mid_turn: false,
                },
            });
        }
        all
    }

    fn per_player<T: Copy>(values: &[T], player: u8) -> Option<T> {
        values.get(usize::from(player)).or(values.last()).copied()
    }

    fn rtt_of(&self, player: u8) -> u32 {
        Self::per_player(&self.rtt_ms, player).unwrap_or(0)
    }

    pub(super) fn proc_of(&self, player: u8) -> u32 {
        Self::per_player(&self.proc_us, player).unwrap_or(0)
    }

    /// The least time a datagram from `a` can take to reach `b` when it may
    /// leave at game time `at_us` or later, µs: the base delay then, or the
    /// wait for a spike's end plus the delay after it, whichever is less.
    /// (Jitter only adds.)
    pub fn earliest_delivery_us(&self, a: u8, b: u8, at_us: u64) -> u64 {
        let mut best = self.one_way_us(a, b, at_us / 1000);
        for spike in &self.spikes {
            let end_us = (spike.start_ms + spike.duration_ms) * 1000;
            if end_us > at_us {
                let later = end_us - at_us + self.one_way_us(a, b, end_us / 1000);
                best = best.min(later);
            }
        }
        best
    }

    /// One-way base delay between two players at game time `at_ms`, µs.
    pub fn one_way_us(&self, a: u8, b: u8, at_ms: u64) -> u64 {
        let rtt = |p: u8| u64::from(self.rtt_of(p));
        let mut base = (rtt(a) + rtt(b)) * 1000 / 4;
        for spike in &self.spikes {
            let active = (spike.start_ms..spike.start_ms + spike.duration_ms).contains(&at_ms);
            let applies = spike.player.map_or(true, |p| p == a || p == b);
            if active && applies {
                base = base.max(u64::from(spike.rtt_ms) * 1000 / 2);
            }
        }
        base
    }

    pub(super) fn validate(&self) -> Result<()> {
        if self.players == 0 || usize::from(self.players) > MAX_SEATS {
            return Err(Error::invalid("players", "1 to 16"));
        }
        if self.fps == 0 {
            return Err(Error::invalid("fps", "1 to 255"));
        }
        if self.rtt_ms.is_empty() || self.proc_us.is_empty() {
            return Err(Error::invalid("rtt and proc", "at least one value each"));
        }
        if self.loss_ppm > 1_000_000 {
            return Err(Error::invalid("loss", "0 to 1"));
        }
        if let Some((p, _, _)) = self.departure {
            if p >= self.players || self.players < 2 {
                return Err(Error::invalid("the departing player", "one of the players"));
            }
        }
        let seats = self
            .faults
            .iter()
            .map(Fault::seat)
            .chain(self.timed_faults.iter().map(|f| f.seat));
        for seat in seats {
            if seat >= self.players || self.players < 2 {
                return Err(Error::invalid(
                    "a fault's player",
                    "one of the players (and there must be two)",
                ));
            }
        }
        if self.liveness_timeout_ms == Some(0) {
            return Err(Error::invalid("the liveness timeout", "positive"));
        }
        let engine_model = self.policy.original_game().is_some();
        let faulty = !self.all_faults().is_empty() || !self.timed_faults.is_empty();
        if engine_model && (faulty || self.diverge.is_some()) {
            return Err(Error::invalid(
                "the faults",
                "none for ra, protocol0 and protocol0-ts: they play the original games' engines, which take no faults (crash, quit, depart, restart, move, attack, burst) and no divergence",
            ));
        }
        if self.duplicate_ppm > 1_000_000 || self.reorder_ppm > 1_000_000 {
            return Err(Error::invalid("dup and reorder", "0 to 1"));
        }
        Ok(())
    }
}

impl GameSpec {
    /// The game times at which path conditions change (ms): the start and
    /// every spike's edges, in order, once each.
    pub(super) fn condition_changes_ms(&self) -> Vec<u64> {
        let mut change_points: Vec<u64> = vec![0];
        for spike in &self.spikes {
            change_points.push(spike.start_ms);
            change_points.push(spike.start_ms + spike.duration_ms);
        }
        change_points.sort_unstable();
        change_points.dedup();
        change_points
    }

    /// The conditions of the path from `a` to `b` from game time `at_ms` on.
    pub(crate) fn path_conditions(&self, a: u8, b: u8, at_ms: u64) -> Conditions {
        Conditions {
            delay_us: self.one_way_us(a, b, at_ms),
            jitter_us: u64::from(self.jitter_ms) * 1000,
            loss_ppm: self.loss_ppm,
            duplicate_ppm: self.duplicate_ppm,
            reorder_ppm: self.reorder_ppm,
            reorder_extra_us: if self.reorder_ppm > 0 { 50_000 } else { 0 },
        }
    }
}
