//! The physical floor of `rungs_sim` is a lower bound (decision 29): no
//! timing — fixed, a baseline or a policy — executes any command sooner than
//! its floor, on any of several seeded networks, spikes and 60 fps included;
//! and the floor is tight: `fixed:1/1`, the least S1 allows, meets it on a
//! LAN.

use rungs_core::timing::{PolicyKind, Timing};
use rungs_sim::{run_game, GameSpec, Spike};

fn networks() -> Vec<GameSpec> {
    let mut lan = GameSpec::new(3, 420, 60, 4);
    lan.seed = 11;
    let mut internet = GameSpec::new(4, 420, 60, 100);
    internet.jitter_ms = 30;
    internet.loss_ppm = 20_000;
    internet.seed = 12;
    let mut mixed = GameSpec::new(3, 360, 30, 20);
    mixed.rtt_ms = vec![20, 90, 300];
    mixed.jitter_ms = 10;
    mixed.seed = 13;
    let mut spike = GameSpec::new(2, 480, 30, 120);
    spike.spikes.push(Spike {
        rtt_ms: 900,
        start_ms: 4000,
        duration_ms: 2500,
        player: None,
    });
    spike.seed = 14;
    vec![lan, internet, mixed, spike]
}

fn timings() -> Vec<PolicyKind> {
    let mut kinds = vec![
        PolicyKind::Adaptive,
        PolicyKind::Tracking,
        PolicyKind::RedAlert,
        PolicyKind::Protocol0,
    ];
    for (send_period, look_ahead) in [(1, 1), (1, 2), (1, 3), (1, 4), (2, 2), (2, 6), (3, 9)] {
        kinds.push(PolicyKind::Fixed(
            Timing::new(send_period, look_ahead).unwrap(),
        ));
    }
    kinds
}

#[test]
fn no_timing_executes_a_command_below_its_floor() {
    for spec in networks() {
        for policy in timings() {
            let mut spec = spec.clone();
            spec.policy = policy;
            spec.commands_per_minute = 600;
            let report = run_game(&spec).unwrap();
            assert!(report.commands_executed > 10, "{policy:?}: commands ran");
            assert_eq!(
                report.commands_below_floor, 0,
                "{policy:?} on {spec:?}: latency mean {} ms, floor mean {} ms",
                report.latency_mean_ms, report.floor_mean_ms
            );
            assert!(report.latency_mean_ms >= report.floor_mean_ms);
        }
    }
}

#[test]
fn the_floor_is_tight_where_nothing_but_frames_stands_in_the_way() {
    // 4 ms round trips: every turn arrives long before its frame, so
    // `fixed:1/1` executes each command on the frame after the one that
    // carried it, which is exactly the floor.
    for fps in [30, 60] {
        let mut lan = networks()[0].clone();
        lan.fps = fps;
        lan.policy = PolicyKind::Fixed(Timing::new(1, 1).unwrap());
        lan.commands_per_minute = 600;
        let report = run_game(&lan).unwrap();
        assert_eq!(report.stall_frames, 0, "{fps} fps: no stall on a LAN");
        let ratio = report.latency_mean_ms / report.floor_mean_ms;
        assert!(
            (1.0..1.02).contains(&ratio),
            "{fps} fps: latency {} ms, floor {} ms",
            report.latency_mean_ms,
            report.floor_mean_ms
        );
    }
}
