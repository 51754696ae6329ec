//! The soak: many seeded games under every fault at once, each judged on
//! what lockstep must never do — desync, lose or double a command, hang,
//! obey a forgery, grow without bound (S4.7, S8). `rungs-sim soak` runs it
//! and prints [`SoakSummary::table`]; a short run is part of `cargo test`.
//!
//! Each game is drawn from its seed ([`soak_spec`]): 2–8 players, round
//! trips 10–300 ms with jitter, loss up to 30 %, duplication, reordering,
//! outages, spikes, crashes (single, simultaneous, mid-turn, the master),
//! quits, restarts, address changes, command bursts, and in a quarter of the
//! games one modified client trying one to three attacks. A quarter of the
//! games place crashes and quits in game time rather than on frames
//! ([`TimedFault`]), where they land while frames wait: a crash about a
//! liveness timeout after another, while the second machine's vote is on
//! its way (vote then vanish); a quit racing a crash; a crash while another
//! machine restarts or moves; crashes in a row down to one survivor.

use super::faults::{Attack, Fault, TimedFault, TimedKind};
use super::game::{run_game, GameReport, GameSpec, OutageSpec, Spike};
use rungs_core::rng::SplitMix64;

/// Bytes a session may hold before the soak calls it unbounded: the sum of
/// the documented caps for an 8-player game is far below this.
pub const HELD_BYTES_LIMIT: usize = 16 << 20;

/// The game seed `index` of a soak seeded `seed` plays.
pub fn game_seed(seed: u64, index: u32) -> u64 {
    SplitMix64::new(seed ^ u64::from(index).wrapping_mul(0x9E37_79B9_7F4A_7C15)).next_u64()
}

/// The game a soak plays for `seed`.
pub fn soak_spec(seed: u64) -> GameSpec {
    soak_draw(seed).0
}

/// The game a soak plays for `seed`, and the kind of crashes and quits it
/// places in time, if any.
pub fn soak_draw(seed: u64) -> (GameSpec, Option<Timed>) {
    let mut timed = None;
    let mut rng = SplitMix64::new(seed);
    let mut pick = |n: u64| rng.below_or_equal(n);
    let players = 2 + pick(6) as u8;
    let frames = 1200 + pick(1200) as u32;
    let mut spec = GameSpec::new(players, frames, 30, 10 + pick(290) as u32);
    spec.seed = seed;
    spec.jitter_ms = pick(40) as u32;
    spec.loss_ppm = match pick(3) {
        0 => 0,
        1 => pick(30_000) as u32,
        2 => pick(100_000) as u32,
        _ => pick(300_000) as u32,
    };
    spec.duplicate_ppm = if pick(1) == 0 { pick(50_000) as u32 } else { 0 };
    spec.reorder_ppm = if pick(1) == 0 {
        pick(100_000) as u32
    } else {
        0
    };
    let game_ms = u64::from(frames) * 1000 / 30;
    if pick(9) < 3 {
        spec.outages.push(OutageSpec {
            start_ms: 5_000 + pick(game_ms / 2),
            duration_ms: 500 + pick(6_000),
            player: if pick(1) == 0 {
                Some(pick(u64::from(players) - 1) as u8)
            } else {
                None
            },
        });
    }
    if pick(9) < 3 {
        spec.spikes.push(Spike {
            rtt_ms: 300 + pick(1200) as u32,
            start_ms: 5_000 + pick(game_ms / 2),
            duration_ms: 1_000 + pick(10_000),
            player: None,
        });
    }
    let seat = |rng: &mut dyn FnMut(u64) -> u64| rng(u64::from(players) - 1) as u8;
    let frame = |rng: &mut dyn FnMut(u64) -> u64| 150 + rng(u64::from(frames) / 2) as u32;
    // Departures: at most players - 1 machines leave, so someone finishes.
    let mut leaving: Vec<u8> = Vec::new();
    let leave = |s: u8, leaving: &mut Vec<u8>| {
        let ok = !leaving.contains(&s) && leaving.len() + 1 < usize::from(players);
        if ok {
            leaving.push(s);
        }
        ok
    };
    match pick(11) {
        0..=2 => {
            let s = seat(&mut pick);
            if leave(s, &mut leaving) {
                let at = frame(&mut pick);
                spec.faults.push(Fault::Crash {
                    seat: s,
                    frame: at,
                    mid_turn: pick(1) == 0,
                });
                if pick(1) == 0 {
                    // A burst just before, so the mid-turn crash splits a turn.
                    spec.faults.push(Fault::Burst {
                        seat: s,
                        frame: at.saturating_sub(1),
                        commands: 4,
                        bytes: 900,
                    });
                }
            }
        }
        3 | 4 => {
            // Several at once (two routers, one ISP), master included sometimes.
            let at = frame(&mut pick);
            for _ in 0..2 {
                let s = if pick(2) == 0 { 0 } else { seat(&mut pick) };
                if leave(s, &mut leaving) {
                    spec.faults.push(Fault::Crash {
                        seat: s,
                        frame: at,
                        mid_turn: pick(2) == 0,
                    });
                }
            }
        }
        5 => {
            let s = seat(&mut pick);
            if leave(s, &mut leaving) {
                spec.faults.push(Fault::Quit {
                    seat: s,
                    frame: frame(&mut pick),
                });
            }
        }
        6 => {
            let s = seat(&mut pick);
            if leave(s, &mut leaving) {
                spec.faults.push(Fault::Restart {
                    seat: s,
                    frame: frame(&mut pick),
                });
            }
        }
        9..=11 if players >= 3 => {
            let at_ms = 5_000 + pick(game_ms / 2);
            let kind = match pick(3) {
                0 => Timed::VoteThenVanish,
                1 => Timed::QuitRacingCrash,
                2 => Timed::CrashDuringRestartOrMove,
                _ => Timed::CrashesInARow,
            };
            let mut rng = |n: u64| pick(n);
            timed_faults(&mut spec, kind, at_ms, &mut rng, &mut leaving);
            timed = Some(kind);
        }
        _ => {}
    }
    if pick(9) < 2 {
        spec.faults.push(Fault::Move {
            seat: seat(&mut pick),
            frame: frame(&mut pick),
        });
    }
    if pick(3) == 0 {
        spec.faults.push(Fault::Burst {
            seat: seat(&mut pick),
            frame: frame(&mut pick),
            commands: 50 + pick(250) as u32,
            bytes: 100 + pick(900) as u16,
        });
    }
    if pick(2) == 0 && players >= 3 {
        // One modified client, not one of the leavers.
        let s = seat(&mut pick);
        if !leaving.contains(&s) {
            for _ in 0..1 + pick(2) {
                let attack = Attack::ALL[pick(Attack::ALL.len() as u64 - 1) as usize];
                spec.faults.push(Fault::Attack {
                    seat: s,
                    frame: frame(&mut pick),
                    attack,
                });
            }
        }
    }
    (spec, timed)
}

/// The kinds of crashes and quits a soak game places in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timed {
    /// A machine crashes, and another (the master half the time) about a
    /// liveness timeout later: while its vote on the first is on its way.
    VoteThenVanish,
    /// A player quits and, shortly before or after, another machine crashes.
    QuitRacingCrash,
    /// A machine restarts or moves and another crashes meanwhile.
    CrashDuringRestartOrMove,
    /// Crashes one after another, each inside the drop of the one before,
    /// down to one or two survivors.
    CrashesInARow,
}

impl Timed {
    /// Its row in the soak table.
    pub fn name(self) -> &'static str {
        match self {
            Timed::VoteThenVanish => "vote then vanish (in time)",
            Timed::QuitRacingCrash => "quit racing a crash (in time)",
            Timed::CrashDuringRestartOrMove => "crash during a restart or move (in time)",
            Timed::CrashesInARow => "crashes in a row (in time)",
        }
    }
}

/// Place `kind`'s faults from game time `at_ms` on, drawing from `pick`;
/// `leaving` holds the seats already leaving (at most players − 1 leave).
fn timed_faults(
    spec: &mut GameSpec,
    kind: Timed,
    at_ms: u64,
    pick: &mut dyn FnMut(u64) -> u64,
    leaving: &mut Vec<u8>,
) {
    let players = spec.players;
    let seat = |pick: &mut dyn FnMut(u64) -> u64, leaving: &mut Vec<u8>| {
        let s = pick(u64::from(players) - 1) as u8;
        let ok = !leaving.contains(&s) && leaving.len() + 1 < usize::from(players);
        ok.then(|| {
            leaving.push(s);
            s
        })
    };
    let crash = |seat, at_ms| TimedFault {
        seat,
        at_ms,
        kind: TimedKind::Crash,
    };
    match kind {
        Timed::VoteThenVanish => {
            let first = seat(pick, leaving);
            // The master half the time: its vote is the one most often
            // heard by some and not others.
            let second = if pick(1) == 0
                && !leaving.contains(&0)
                && leaving.len() + 1 < usize::from(players)
            {
                leaving.push(0);
                Some(0)
            } else {
                seat(pick, leaving)
            };
            let gap = 1_600 + pick(1_200);
            spec.timed_faults.extend(first.map(|s| crash(s, at_ms)));
            spec.timed_faults
                .extend(second.map(|s| crash(s, at_ms + gap)));
        }
        Timed::QuitRacingCrash => {
            let quitter = seat(pick, leaving);
            let crashed = seat(pick, leaving);
            let gap = pick(2_000);
            let (quit_at, crash_at) = if pick(1) == 0 {
                (at_ms, at_ms + gap)
            } else {
                (at_ms + gap, at_ms)
            };
            spec.timed_faults.extend(quitter.map(|s| TimedFault {
                seat: s,
                at_ms: quit_at,
                kind: TimedKind::Quit,
            }));
            spec.timed_faults
                .extend(crashed.map(|s| crash(s, crash_at)));
        }
        Timed::CrashDuringRestartOrMove => {
            // The frame that runs at about `at_ms` (30 frames a second).
            let frame = (at_ms * u64::from(spec.fps) / 1000) as u32;
            let other = pick(u64::from(players) - 1) as u8;
            if pick(1) == 0 {
                if let Some(s) = seat(pick, leaving) {
                    spec.faults.push(Fault::Restart { seat: s, frame });
                }
            } else {
                spec.faults.push(Fault::Move { seat: other, frame });
            }
            let crashed = seat(pick, leaving);
            let offset = pick(2_000);
            spec.timed_faults
                .extend(crashed.map(|s| crash(s, (at_ms + offset).saturating_sub(500))));
        }
        Timed::CrashesInARow => {
            let mut t = at_ms;
            for _ in 0..1 + pick(u64::from(players) - 2) {
                if let Some(s) = seat(pick, leaving) {
                    spec.timed_faults.push(crash(s, t));
                }
                t += 300 + pick(2_500);
            }
        }
    }
}

/// How one game of the soak went.
#[derive(Debug, Clone, PartialEq)]
pub struct SoakGame {
    pub seed: u64,
    pub players: u8,
    pub frames: u32,
    pub crashes: usize,
    pub modified: bool,
    /// The crashes and quits it placed in time, if any.
    pub timed: Option<Timed>,
    /// `None`: the game did not finish (a hang) — with the reason.
    pub report: Result<GameReport, String>,
}

impl SoakGame {
    /// The invariants this game broke, in words; empty when sound.
    pub fn failures(&self) -> Vec<String> {
        let report = match &self.report {
            Ok(r) => r,
            Err(e) => return vec![format!("hang: {e}")],
        };
        let mut out = report.broken_invariants();
        if report.max_held_bytes > HELD_BYTES_LIMIT {
            out.push(format!("{} bytes held", report.max_held_bytes));
        }
        out
    }
}

/// Play soak game `index` of a soak seeded `seed`.
pub fn soak_game(seed: u64, index: u32) -> SoakGame {
    let game_seed = game_seed(seed, index);
    let (spec, timed) = soak_draw(game_seed);
    SoakGame {
        seed: game_seed,
        players: spec.players,
        frames: spec.frames,
        crashes: spec
            .faults
            .iter()
            .filter(|f| matches!(f, Fault::Crash { .. }))
            .count()
            + spec
                .timed_faults
                .iter()
                .filter(|f| f.kind == TimedKind::Crash)
                .count(),
        timed,
        modified: spec
            .faults
            .iter()
            .any(|f| matches!(f, Fault::Attack { .. })),
        report: run_game(&spec).map_err(|e| e.to_string()),
    }
}

/// One row of the soak table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SoakRow {
    pub games: u64,
    pub frames: u64,
    pub desyncs: u64,
    pub lost: u64,
    pub doubled: u64,
    pub hangs: u64,
    pub forged_obeyed: u64,
    pub removed_by_other: u64,
    pub not_dropped: u64,
    pub refused: u64,
    pub max_held_bytes: usize,
}

impl SoakRow {
    fn add(&mut self, game: &SoakGame) {
        self.games += 1;
        self.frames += u64::from(game.frames);
        match &game.report {
            Err(_) => self.hangs += 1,
            Ok(r) => {
                self.desyncs += r.desyncs + u64::from(!r.logs_identical);
                self.lost += r.commands_lost;
                self.doubled += u64::from(!r.commands_in_order);
                self.forged_obeyed += r.forged_executed;
                self.removed_by_other += r.unexpected_removals;
                self.not_dropped += u64::from(!r.vanished_dropped);
                self.refused += r.refused_items;
                self.max_held_bytes = self.max_held_bytes.max(r.max_held_bytes);
            }
        }
    }
}

/// Every game of a soak, and rows by kind.
#[derive(Debug, Clone, Default)]
pub struct SoakSummary {
    pub games: Vec<SoakGame>,
}

impl SoakSummary {
    pub fn add(&mut self, game: SoakGame) {
        self.games.push(game);
    }

    /// Whether every game was sound.
    pub fn sound(&self) -> bool {
        self.games.iter().all(|g| g.failures().is_empty())
    }

    /// The rows: by players, by faults, and the total.
    pub fn rows(&self) -> Vec<(String, SoakRow)> {
        let mut rows: Vec<(String, SoakRow)> = Vec::new();
        let mut add =
            |name: String, game: &SoakGame| match rows.iter_mut().find(|(n, _)| *n == name) {
                Some((_, row)) => row.add(game),
                None => {
                    let mut row = SoakRow::default();
                    row.add(game);
                    rows.push((name, row));
                }
            };
        for players in 2..=8u8 {
            for g in self.games.iter().filter(|g| g.players == players) {
                add(format!("{players} players"), g);
            }
        }
        for g in &self.games {
            let crashes = match g.crashes {
                0 => "no crash",
                1 => "one crash",
                _ => "crashes at once",
            };
            add(crashes.to_string(), g);
        }
        for g in self.games.iter().filter(|g| g.modified) {
            add("modified client".into(), g);
        }
        for timed in [
            Timed::VoteThenVanish,
            Timed::QuitRacingCrash,
            Timed::CrashDuringRestartOrMove,
            Timed::CrashesInARow,
        ] {
            for g in self.games.iter().filter(|g| g.timed == Some(timed)) {
                add(timed.name().into(), g);
            }
        }
        for g in &self.games {
            add("all".into(), g);
        }
        rows
    }

    /// The table `rungs-sim soak` prints.
    pub fn table(&self) -> String {
        let mut out = String::from(
            "| games | kind | frames | desyncs | lost | doubled | hangs | forged obeyed | removed by another | vanished not dropped | refused items | max held KB |\n\
             |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for (name, r) in self.rows() {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                r.games,
                name,
                r.frames,
                r.desyncs,
                r.lost,
                r.doubled,
                r.hangs,
                r.forged_obeyed,
                r.removed_by_other,
                r.not_dropped,
                r.refused,
                r.max_held_bytes.div_ceil(1024)
            ));
        }
        out
    }
}
