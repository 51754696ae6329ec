//! Whole games of lockstep sessions over the simulated network:
//! the real session, timing and transport code on every machine, a virtual
//! clock, a seeded network.

use crate::sound::assert_sound;
use rungs_core::timing::{PolicyKind, Timing};
use rungs_sim::{run_game, Departure, GameSpec, Spike};

#[test]
fn a_lan_game_runs_every_command_once_on_every_machine() {
    let spec = GameSpec::new(4, 3000, 30, 10);
    let report = run_game(&spec).unwrap();
    assert_sound(&report);
    assert!(report.commands_issued > 300);
    assert_eq!(report.commands_executed, report.commands_issued);
    assert_eq!(report.stall_frames, 0);
    // Calibrated to the ladder's floor, 1/4, and stays (lan_stable.vec).
    assert_eq!(report.timeline, vec![(0, 2, 6, 30), (76, 1, 4, 30)]);
    // 1/4 at 30 fps: 133 ms look-ahead plus up to a frame to the send frame.
    assert!(
        report.latency_mean_ms > 133.0 && report.latency_mean_ms < 180.0,
        "{}",
        report.latency_mean_ms
    );
}

#[test]
fn a_lasting_spike_raises_the_timing_and_the_descent_brings_it_back() {
    // 1500 ms for 30 s: evaluations see it (S4.4 step 2), then three
    // qualifying evaluations and a descent bring the timing back (S4.4).
    let mut spec = GameSpec::new(4, 4000, 30, 120);
    spec.spikes.push(Spike {
        rtt_ms: 1500,
        start_ms: 30_000,
        duration_ms: 30_000,
        player: None,
    });
    let report = run_game(&spec).unwrap();
    assert_sound(&report);
    assert_eq!(report.commands_executed, report.commands_issued);
    let extended = report
        .timeline
        .iter()
        .any(|(_, sp, la, _)| Timing::new(*sp, *la).unwrap().is_extended());
    assert!(extended, "{:?}", report.timeline);
    let last = report.timeline.last().unwrap();
    assert!(last.1 <= 2, "came back down: {:?}", report.timeline);
}

#[test]
fn a_short_spike_between_evaluations_is_not_answered_after_it_is_over() {
    // 1500 ms for 5 s: the report that covers it is replaced by a calm one
    // before the next evaluation, so the timing does not rise after the fact
    // (reports carry the worst round trip of their own interval, S3).
    let mut spec = GameSpec::new(4, 4000, 30, 120);
    spec.spikes.push(Spike {
        rtt_ms: 1500,
        start_ms: 30_000,
        duration_ms: 5_000,
        player: None,
    });
    let report = run_game(&spec).unwrap();
    assert_sound(&report);
    assert_eq!(report.timeline, vec![(0, 2, 6, 30), (76, 1, 4, 30)]);
    assert!(report.stall_frames > 0, "a spike no timing covered stalls");
}

#[test]
fn a_crashed_master_is_dropped_and_the_game_goes_on() {
    let mut spec = GameSpec::new(4, 3000, 30, 60);
    spec.departure = Some((0, 1200, Departure::Crash));
    let report = run_game(&spec).unwrap();
    assert_sound(&report);
    assert!(report.links_lost >= 3, "every survivor saw the link go");
    // The survivors waited about the liveness timeout (2 s), not forever.
    assert!(
        report.stall_ms >= 1500.0 && report.stall_ms < 6000.0,
        "{}",
        report.stall_ms
    );
    // Nothing issued by a survivor was lost; the crashed master's commands up
    // to its cut executed everywhere alike (commands_in_order checks both).
    assert!(report.commands_executed <= report.commands_issued);
}

#[test]
fn a_player_who_quits_leaves_without_a_stall() {
    let mut spec = GameSpec::new(4, 3000, 30, 60);
    spec.departure = Some((0, 1200, Departure::Quit));
    let report = run_game(&spec).unwrap();
    assert_sound(&report);
    assert_eq!(report.stall_frames, 0);
    assert_eq!(report.commands_executed, report.commands_issued);
}

#[test]
fn a_slow_machine_caps_the_frame_rate() {
    let mut spec = GameSpec::new(3, 3000, 30, 40);
    spec.proc_us = vec![5000, 5000, 45_000];
    let report = run_game(&spec).unwrap();
    assert_sound(&report);
    assert!(
        report.timeline.iter().any(|(_, _, _, fps)| *fps == 22),
        "{:?}",
        report.timeline
    );
}

#[test]
fn a_slow_master_does_not_leave_the_others_waiting_on_every_frame() {
    // The master's frame takes 42.7 ms at 60 fps: it falls behind until
    // the rate comes down to 23 fps (its slack then is 0.8 ms a frame).
    // Racing to catch up with the old schedule, it kept the other machine
    // waiting for its turns on 98 % of the frames; it re-anchors instead.
    // (`tracking` leaves it 5 % of a frame: 22 fps.)
    for (policy, rate) in [(PolicyKind::Adaptive, 23), (PolicyKind::Tracking, 22)] {
        let mut spec = GameSpec::new(2, 1800, 60, 7);
        spec.proc_us = vec![42_683, 5000];
        spec.policy = policy;
        let report = run_game(&spec).unwrap();
        assert_sound(&report);
        assert!(
            report.timeline.iter().any(|(_, _, _, fps)| *fps == rate),
            "{:?}",
            report.timeline
        );
        assert!(
            report.stall_frames * 100 < u64::from(report.frames) * 5,
            "{policy:?}: {} stalled frames of {}",
            report.stall_frames,
            report.frames
        );
    }
}

#[test]
fn the_same_seed_gives_the_same_game() {
    let mut spec = GameSpec::new(3, 1500, 30, 80);
    spec.jitter_ms = 20;
    spec.loss_ppm = 50_000;
    spec.seed = 42;
    let first = run_game(&spec).unwrap();
    let second = run_game(&spec).unwrap();
    assert_eq!(first, second);
    spec.seed = 43;
    assert_ne!(run_game(&spec).unwrap().packets, first.packets);
}

#[test]
fn baselines_run_through_the_same_machinery() {
    for policy in [
        PolicyKind::Fixed(Timing::new(2, 6).unwrap()),
        PolicyKind::RedAlert,
        PolicyKind::Protocol0,
    ] {
        let mut spec = GameSpec::new(3, 1500, 30, 150);
        spec.policy = policy;
        let report = run_game(&spec).unwrap();
        assert_sound(&report);
        assert_eq!(
            report.commands_executed, report.commands_issued,
            "{policy:?}"
        );
    }
}

/// The soak test: 8 machines, 20,000 frames, 10 % loss, jitter, a
/// spike and the master crashing mid-game: no desync, nothing lost or
/// executed twice, every machine's log identical.
#[test]
fn soak_eight_machines_twenty_thousand_frames() {
    let mut spec = GameSpec::new(8, 20_000, 30, 80);
    spec.rtt_ms = vec![40, 60, 80, 100, 120, 60, 90, 150];
    spec.jitter_ms = 15;
    spec.loss_ppm = 100_000;
    spec.spikes.push(Spike {
        rtt_ms: 900,
        start_ms: 120_000,
        duration_ms: 20_000,
        player: Some(5),
    });
    spec.departure = Some((0, 10_000, Departure::Crash));
    spec.seed = 2026;
    let report = run_game(&spec).unwrap();
    assert_sound(&report);
    assert!(report.commands_issued > 10_000);
    assert!(report.commands_executed <= report.commands_issued);
    assert!(
        report.timeline.len() > 2,
        "the timing adapted: {:?}",
        report.timeline
    );
}

/// Crashes of any seat at any moment under loss and jitter, over many
/// seeds: the drop protocol (votes, cut, relays) never deadlocks and never
/// lets a machine execute what another does not.
#[test]
fn drops_agree_under_loss_for_any_seat_and_moment() {
    let mut rng = rungs_sim::SplitMix64::new(99);
    for round in 0..24u64 {
        let players = 3 + (rng.next_u64() % 4) as u8;
        let mut spec = GameSpec::new(players, 1600, 30, 40 + (rng.next_u64() % 200) as u32);
        spec.jitter_ms = (rng.next_u64() % 30) as u32;
        spec.loss_ppm = (rng.next_u64() % 150_000) as u32;
        let seat = (rng.next_u64() % u64::from(players)) as u8;
        let at = 200 + (rng.next_u64() % 1000) as u32;
        spec.departure = Some((seat, at, Departure::Crash));
        spec.seed = round;
        let report = run_game(&spec).unwrap_or_else(|e| panic!("round {round} ({spec:?}): {e}"));
        assert!(report.logs_identical, "round {round}: {spec:?}");
        assert!(report.commands_in_order, "round {round}: {spec:?}");
        assert_eq!(report.desyncs, 0, "round {round}");
    }
}

/// A machine whose simulation goes wrong is caught by the state checksums
/// exchanged in the turns: a desync naming that seat.
#[test]
fn a_diverging_machine_is_reported_as_a_desync() {
    let mut spec = GameSpec::new(3, 1200, 30, 60);
    spec.diverge = Some((2, 500));
    let report = run_game(&spec).unwrap();
    assert!(report.desyncs >= 1, "{report:?}");
    assert!(
        report.logs_identical,
        "the commands were the same; the state was not"
    );
}

#[test]
fn under_tracking_the_frames_needs_shed_the_margin_a_clean_path_does_not_need() {
    // 120 ms, nothing lost: the round trips need 2 frames at 30 fps and
    // the game starts with a frame of margin. Every machine reports the
    // look-ahead its frames needed (at most 2), and after 512 frames of
    // that the margin goes; the calm shed alone waited 1024 frames.
    let mut spec = GameSpec::new(4, 1500, 30, 120);
    spec.policy = PolicyKind::Tracking;
    let report = run_game(&spec).unwrap();
    assert_sound(&report);
    assert_eq!(report.stall_frames, 0);
    let shed = report
        .timeline
        .iter()
        .find(|(_, _, la, _)| *la == 2)
        .map(|(frame, ..)| *frame);
    assert!(
        shed.is_some_and(|f| (512..700).contains(&f)),
        "{:?}",
        report.timeline
    );
    assert_eq!(report.timeline.last().map(|t| t.2), Some(2));

    // 4 % loss: frames need the margin's frame now and then, so it stays
    // (a shed would have to earn it back with stalls).
    spec.loss_ppm = 40_000;
    spec.frames = 3000;
    spec.rtt_ms = vec![150];
    let report = run_game(&spec).unwrap();
    assert_sound(&report);
    assert!(
        report.stall_frames * 1000 <= u64::from(report.frames) * 2,
        "{} stalled frames of {}: {:?}",
        report.stall_frames,
        report.frames,
        report.timeline
    );
}
