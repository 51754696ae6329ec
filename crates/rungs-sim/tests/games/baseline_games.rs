//! Whole games of the baselines on the simulated network: the original
//! games' engines (`ra`, `protocol0`, `protocol0-ts`, `src/sim/classic`)
//! and the delay a careful host sets from the lobby (`lobby`), judged on
//! what they must keep and on the rules `docs/baselines.md` lists.

use rungs_core::timing::PolicyKind;
use rungs_sim::{
    run_game, run_game_parallel, run_relay_game, Departure, GameSpec, RelayPlacement, Spike,
};

fn game(players: u8, frames: u32, fps: u8, rtt_ms: u32, policy: PolicyKind) -> GameSpec {
    let mut spec = GameSpec::new(players, frames, fps, rtt_ms);
    spec.policy = policy;
    spec
}

/// Sound (the shared judgement), and no command ran below the latency floor.
fn assert_sound(report: &rungs_sim::GameReport) {
    crate::sound::assert_sound(report);
    assert_eq!(report.commands_below_floor, 0);
}

const ENGINES: [PolicyKind; 3] = [
    PolicyKind::RedAlert,
    PolicyKind::Protocol0,
    PolicyKind::Protocol0Ts,
];

#[test]
fn the_original_engines_run_every_command_once_everywhere_on_a_rough_network() {
    for policy in ENGINES {
        let mut spec = game(5, 2500, 30, 120, policy);
        spec.rtt_ms = vec![40, 120, 200, 90, 300];
        spec.jitter_ms = 40;
        spec.loss_ppm = 30_000;
        spec.duplicate_ppm = 10_000;
        spec.reorder_ppm = 10_000;
        spec.spikes.push(Spike {
            rtt_ms: 900,
            start_ms: 30_000,
            duration_ms: 4_000,
            player: None,
        });
        let report = run_game(&spec).unwrap();
        assert_sound(&report);
        assert!(report.commands_issued > 300, "{policy:?}");
        assert_eq!(
            report,
            run_game(&spec).unwrap(),
            "deterministic: {policy:?}"
        );
        assert_eq!(
            report,
            run_game_parallel(&spec).unwrap(),
            "two threads, the same game: {policy:?}"
        );
    }
}

#[test]
fn red_alert_starts_at_3_6_and_its_master_sends_no_timing_before_frame_256() {
    let report = run_game(&game(3, 1200, 30, 150, PolicyKind::RedAlert)).unwrap();
    assert_sound(&report);
    assert_eq!(report.timeline[0], (0, 3, 6, 30));
    // The first TIMING goes out on frame 256 (no PROCESS_TIME has executed
    // on 128) and executes a look-ahead later, on a send frame.
    let first_change = report.timeline[1].0;
    assert!(
        (256..=256 + 6 + 3).contains(&first_change),
        "{:?}",
        report.timeline
    );
    // 150 ms: 9 ticks, 2 frames one way at 30 fps, at least three send
    // periods: 3/9.
    assert_eq!(report.timeline[1], (first_change, 3, 9, 30));
    // A 60 fps game starts at Red Alert's 30 fps too, and the master's
    // TIMING takes it to 60.
    let fast = run_game(&game(2, 1200, 60, 40, PolicyKind::RedAlert)).unwrap();
    assert_eq!(fast.timeline[0], (0, 3, 6, 30));
    assert!(
        fast.timeline.iter().any(|t| t.3 == 60),
        "{:?}",
        fast.timeline
    );
}

#[test]
fn red_alerts_master_times_from_its_own_connections_only() {
    // Seat 0 (the master) is near both others; the path between seats 1
    // and 2 is 500 ms. The master's connections say 250 ms: 15 ticks, 3/9.
    let mut spec = game(3, 1500, 30, 0, PolicyKind::RedAlert);
    spec.rtt_ms = vec![2, 500, 500];
    let report = run_game(&spec).unwrap();
    assert_sound(&report);
    assert!(
        report.timeline.iter().skip(1).all(|t| (t.1, t.2) == (3, 9)),
        "{:?}",
        report.timeline
    );
    // 3/9 waits for a peer's send frame 6 frames back: 200 ms, under the
    // 250 ms the far pair's packets take, so that pair stalls all game.
    assert!(
        report.stall_frames * 10 > u64::from(report.frames),
        "{}",
        report.stall_frames
    );
}

#[test]
fn red_alert_stalls_on_a_lost_command_packet_until_its_resend() {
    // The same game without and with 2 % loss: each lost command packet
    // holds every machine until its resend, a response time and 10 ticks
    // after its first send; the empty FRAMEINFOs are not resent at all.
    let clean = run_game(&game(3, 3000, 30, 100, PolicyKind::RedAlert)).unwrap();
    let mut lossy_spec = game(3, 3000, 30, 100, PolicyKind::RedAlert);
    lossy_spec.loss_ppm = 20_000;
    let lossy = run_game(&lossy_spec).unwrap();
    assert_sound(&clean);
    assert_sound(&lossy);
    assert_eq!(clean.stall_frames, 0);
    assert!(lossy.stall_frames > 20, "{}", lossy.stall_frames);
    // Such a stall lasts about the resend delay: 6 + 10 ticks less the
    // slack of 3/9's wait (200 ms), at least 30 ms on average.
    assert!(
        lossy.stall_ms / lossy.stall_frames as f64 > 30.0,
        "{}",
        lossy.stall_ms
    );
}

#[test]
fn protocol0_levels_rise_at_60_fps_for_a_period_and_never_come_down() {
    // RA2/YR: the first response times go out on frame 243 and execute on
    // 256, after that frame's TIMING was made: the level goes out on 384
    // and is in force on 396. TS: out on 181, executed on 194, sent on 256,
    // in force on 268.
    for (policy, timing, first_level) in [
        (PolicyKind::Protocol0, (3, 12), 396),
        (PolicyKind::Protocol0Ts, (3, 9), 268),
    ] {
        // 150 ms: 9 ticks, level 3 on both tables.
        let mut spec = game(3, 2400, 30, 150, policy);
        spec.spikes.push(Spike {
            rtt_ms: 700,
            start_ms: 40_000,
            duration_ms: 10_000,
            player: None,
        });
        let report = run_game(&spec).unwrap();
        assert_sound(&report);
        assert_eq!(report.timeline[0], (0, 2, 12, 30), "{policy:?}");
        // The first level, at 60 fps: at once, or where it is a shorter
        // look-ahead (2/12 to 3/9), its send period at once and the rest
        // staged (S5) until the events sent under 2/12 are due.
        assert_eq!(report.timeline[1].0, first_level, "{:?}", report.timeline);
        let at = report
            .timeline
            .iter()
            .position(|t| (t.1, t.2, t.3) == (timing.0, timing.1, 60))
            .unwrap_or_else(|| panic!("{policy:?}: {:?}", report.timeline));
        assert!(
            report.timeline[at].0 <= first_level + 20,
            "{:?}",
            report.timeline
        );
        // The next period's TIMING brings the game speed's 30 fps back.
        let next = report.timeline[at + 1];
        assert_eq!(
            (next.1, next.2, next.3),
            (timing.0, timing.1, 30),
            "{:?}",
            report.timeline
        );
        // The spike raises the level; nothing ever lowers it.
        let look_aheads: Vec<u8> = report.timeline.iter().map(|t| t.2).collect();
        let levels: Vec<u8> = report.timeline.iter().map(|t| t.1).collect();
        assert!(
            levels.windows(2).all(|w| w[0] <= w[1]),
            "{:?}",
            report.timeline
        );
        assert!(
            *look_aheads.last().unwrap() > timing.1,
            "{:?}",
            report.timeline
        );
    }
}

#[test]
fn lobby_sets_a_fixed_delay_from_the_hosts_pings() {
    // 100 ms to every player, no jitter: 50 ms one way is 1.5 frames at
    // 30 fps, 2, plus a frame: 1/3, all game.
    let calm = run_game(&game(4, 900, 30, 100, PolicyKind::Lobby)).unwrap();
    assert_sound(&calm);
    assert_eq!(calm.timeline, vec![(0, 1, 3, 30)]);
    // Jitter the pings show is covered: 100 ms and up to 2 x 40 more.
    let mut jittery = game(4, 900, 30, 100, PolicyKind::Lobby);
    jittery.jitter_ms = 40;
    let report = run_game(&jittery).unwrap();
    assert!(report.timeline[0].2 >= 4, "{:?}", report.timeline);
    // A spike later in the game is not in the lobby's pings.
    let mut spiked = game(4, 900, 30, 100, PolicyKind::Lobby);
    spiked.spikes.push(Spike {
        rtt_ms: 1000,
        start_ms: 10_000,
        duration_ms: 5_000,
        player: None,
    });
    let report = run_game(&spiked).unwrap();
    assert_eq!(report.timeline, vec![(0, 1, 3, 30)]);
    assert!(report.stall_frames > 0);
}

#[test]
fn the_original_engines_take_no_faults_and_no_relay() {
    for policy in ENGINES {
        let mut spec = game(3, 600, 30, 100, policy);
        spec.departure = Some((1, 300, Departure::Crash));
        assert!(run_game(&spec).is_err(), "{policy:?} refuses a crash");
        let mut spec = game(3, 600, 30, 100, policy);
        spec.diverge = Some((1, 300));
        assert!(run_game(&spec).is_err(), "{policy:?} refuses a divergence");
        let spec = game(3, 600, 30, 100, policy);
        let placement = RelayPlacement { one_way_ms: vec![] };
        assert!(
            run_relay_game(&spec, &placement).is_err(),
            "{policy:?} is peer-to-peer"
        );
    }
}
