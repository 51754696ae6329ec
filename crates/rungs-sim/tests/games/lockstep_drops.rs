//! Drops (S4.7): every survivor decides the same cut for a vanished player,
//! in every interleaving of crashes, losses and message orders, and drops
//! it without the engine asking. Whole simulated games of real sessions,
//! with crashes and quits placed in game time, so that they land while
//! frames wait (inside another player's drop), each judged on invariants.
//! The agreement itself is model-checked in `tools/drop-model`.

use crate::sound::assert_sound;
use rungs_sim::{run_game, Fault, GameSpec, SplitMix64, TimedFault, TimedKind};

fn at(seat: u8, at_ms: u64, kind: TimedKind) -> TimedFault {
    TimedFault { seat, at_ms, kind }
}

/// The audit's draw: one machine crashes, and another (often the master)
/// about a liveness timeout later, while its vote on the first is on its
/// way: some survivors hear it, some do not.
fn vote_then_vanish(seed: u64) -> GameSpec {
    let mut rng = SplitMix64::new(seed);
    let mut pick = |n: u64| rng.below_or_equal(n);
    let players = 4 + pick(2) as u8;
    let mut spec = GameSpec::new(players, 900, 30, 20 + pick(130) as u32);
    spec.seed = seed;
    spec.jitter_ms = pick(20) as u32;
    spec.loss_ppm = 20_000 + pick(180_000) as u32;
    let first = 1 + pick(u64::from(players) - 2) as u8;
    let second = if pick(1) == 0 {
        0
    } else {
        (first + 1 + pick(u64::from(players) - 3) as u8) % players
    };
    let second = if second == first { 0 } else { second };
    let t = 8_000 + pick(10_000);
    let gap = 1_600 + pick(1_200);
    spec.timed_faults = vec![
        at(first, t, TimedKind::Crash),
        at(second, t + gap, TimedKind::Crash),
    ];
    spec
}

#[test]
fn a_voter_that_vanishes_while_its_vote_reached_only_some_survivors_freezes_no_one() {
    // Before the agreement, each of these froze every survivor: the ones
    // that heard the second machine's vote cut the first there, the ones
    // that did not waited for a vote that never came (14 of 300 draws).
    for seed in [0, 59, 94, 208, 213, 276] {
        let spec = vote_then_vanish(seed);
        let report = run_game(&spec).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_sound(&report);
    }
}

#[test]
fn a_player_who_quits_just_before_another_crashes_still_leaves() {
    // The audit's two games: the quitter waited for the crashed seat and
    // never reached its own removal ("the game stalled").
    let mut small = GameSpec::new(4, 1200, 30, 20);
    small.seed = 930104;
    small.jitter_ms = 100;
    small.loss_ppm = 300_000;
    small.faults = vec![
        Fault::Quit {
            seat: 0,
            frame: 104,
        },
        Fault::Crash {
            seat: 2,
            frame: 106,
            mid_turn: false,
        },
    ];
    let mut large = GameSpec::new(8, 1200, 30, 300);
    large.seed = 499464;
    large.jitter_ms = 10;
    large.loss_ppm = 300_000;
    large.duplicate_ppm = 200_000;
    large.faults = vec![
        Fault::Quit {
            seat: 4,
            frame: 552,
        },
        Fault::Crash {
            seat: 5,
            frame: 554,
            mid_turn: false,
        },
    ];
    for spec in [small, large] {
        let report = run_game(&spec).expect("every machine finishes or leaves");
        assert_sound(&report);
    }
}

#[test]
fn a_quit_racing_a_crash_in_game_time_lets_both_go() {
    for (gap_ms, quitter_first) in [(0, true), (150, true), (400, false), (1_900, true)] {
        let mut spec = GameSpec::new(5, 900, 30, 80);
        spec.loss_ppm = 50_000;
        spec.seed = 40 + gap_ms;
        let (quit, crash) = if quitter_first {
            (10_000, 10_000 + gap_ms)
        } else {
            (10_000 + gap_ms, 10_000)
        };
        spec.timed_faults = vec![at(1, quit, TimedKind::Quit), at(3, crash, TimedKind::Crash)];
        let report = run_game(&spec).unwrap_or_else(|e| panic!("gap {gap_ms}: {e}"));
        assert_sound(&report);
    }
}

#[test]
fn a_vanished_player_is_dropped_without_the_engine_asking() {
    // The engines of these games never call drop_player: the session
    // drops the crashed machine by itself once its link is lost.
    let mut spec = GameSpec::new(3, 900, 30, 40);
    spec.timed_faults = vec![at(2, 8_000, TimedKind::Crash)];
    assert!(!spec.manual_drops);
    let report = run_game(&spec).expect("the survivors finish the game");
    assert_sound(&report);
}

#[test]
fn an_engine_that_decides_drops_itself_still_can() {
    let mut spec = GameSpec::new(4, 900, 30, 40);
    spec.manual_drops = true;
    spec.timed_faults = vec![
        at(1, 8_000, TimedKind::Crash),
        at(3, 9_500, TimedKind::Crash),
    ];
    let report = run_game(&spec).expect("the survivors finish the game");
    assert_sound(&report);
}

#[test]
fn a_shorter_liveness_timeout_stalls_a_crash_less() {
    // On a LAN the default (2 s at least) is most of a crash's cost.
    let lan = |liveness_ms: Option<u64>| {
        let mut spec = GameSpec::new(4, 900, 30, 10);
        spec.liveness_timeout_ms = liveness_ms;
        spec.timed_faults = vec![at(3, 10_000, TimedKind::Crash)];
        let report = run_game(&spec).expect("the survivors finish the game");
        assert_sound(&report);
        report.stall_ms
    };
    let default = lan(None);
    let short = lan(Some(400));
    assert!(
        default > 1_900.0 && short < default - 1_400.0,
        "stalled {default} ms by default, {short} ms at 400 ms"
    );
}

#[test]
fn crashes_in_a_row_down_to_one_survivor_are_all_dropped() {
    // Each lands inside the drop of the one before (any number of crashes
    // up to all but one, S4.7).
    let mut spec = GameSpec::new(5, 900, 30, 60);
    spec.loss_ppm = 30_000;
    spec.timed_faults = vec![
        at(0, 8_000, TimedKind::Crash),
        at(2, 8_900, TimedKind::Crash),
        at(4, 10_100, TimedKind::Crash),
        at(1, 11_600, TimedKind::Crash),
    ];
    let report = run_game(&spec).expect("the last survivor finishes the game");
    assert_sound(&report);
}

#[test]
fn a_crash_during_a_restart_or_a_move_is_dropped() {
    for moving in [false, true] {
        let mut spec = GameSpec::new(4, 900, 30, 50);
        spec.loss_ppm = 20_000;
        spec.faults = vec![if moving {
            Fault::Move {
                seat: 1,
                frame: 300,
            }
        } else {
            Fault::Restart {
                seat: 1,
                frame: 300,
            }
        }];
        // Frame 300 runs at about 10 s: the crash lands in the restart's
        // drop, or while the others follow the move.
        spec.timed_faults = vec![at(2, 10_050, TimedKind::Crash)];
        let report = run_game(&spec).unwrap_or_else(|e| panic!("moving {moving}: {e}"));
        assert_sound(&report);
    }
}
