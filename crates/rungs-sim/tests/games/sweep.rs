//! A short `rungs-sim sweep` (`docs/rungs-sim.md`, "The sweep"): conditions drawn from a seed,
//! every policy on each, the oracle searched for.

use rungs_core::timing::PolicyKind;
use rungs_sim::stalls_within_oracle_bound;
use rungs_sim::sweep::{run_condition, sweep_condition, sweep_policies};

#[test]
fn conditions_are_drawn_within_the_issue_ranges_and_replayable() {
    for index in 0..40 {
        let spec = sweep_condition(7, index, 600);
        assert!((2..=8).contains(&spec.players));
        assert!(spec.fps == 30 || spec.fps == 60);
        assert!(spec.rtt_ms.iter().all(|r| (2..=400).contains(r)));
        assert!(spec.jitter_ms <= 80 && spec.loss_ppm <= 80_000);
        assert!(spec
            .spikes
            .iter()
            .all(|s| (500..=10_000).contains(&s.duration_ms)));
        assert_eq!(spec, sweep_condition(7, index, 600), "replayable");
    }
    let spiked = (0..40)
        .filter(|i| !sweep_condition(7, *i, 600).spikes.is_empty())
        .count();
    assert!(
        (10..=30).contains(&spiked),
        "about half have a spike: {spiked}"
    );
}

#[test]
fn the_oracle_is_the_best_fixed_timing_that_holds() {
    let result = run_condition(3, 0, 300).unwrap();
    assert_eq!(result.reports.len(), sweep_policies().len());
    let oracle = result.oracle.expect("some fixed timing holds");
    assert!(stalls_within_oracle_bound(&oracle.report));
    assert!(oracle.report.latency_mean_ms >= oracle.report.floor_mean_ms);
    assert_eq!(oracle.report.commands_below_floor, 0);
    // Every fixed timing the sweep played that holds is no better.
    for (policy, report) in &result.reports {
        if let PolicyKind::Fixed(timing) = policy {
            if stalls_within_oracle_bound(report) && timing.send_period() <= 6 {
                assert!(
                    oracle.report.latency_mean_ms <= report.latency_mean_ms,
                    "{timing} beats the oracle {}",
                    oracle.timing
                );
            }
        }
    }
}
