//! `rungs-sim --topology relay`: the same game flags played through a relay.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_rungs-sim");

#[test]
fn a_relay_game_runs_and_agrees() {
    let out = Command::new(BIN)
        .args([
            "--players",
            "3",
            "--frames",
            "300",
            "--rtt",
            "80",
            "--jitter",
            "5",
        ])
        .args(["--topology", "relay", "--relay-ms", "10,30"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    assert!(text.contains("topology   relay"), "{text}");
    assert!(
        text.contains("logs identical yes, commands in order yes, desyncs 0"),
        "{text}"
    );
    // Each player's own figures: behind a relay each has its own buffer.
    for seat in 0..3 {
        assert!(text.contains(&format!("  seat {seat}  ")), "{text}");
    }
    assert!(text.contains("(mean / p95, own commands)"), "{text}");
}

#[test]
fn a_diverging_relay_game_exits_3() {
    let out = Command::new(BIN)
        .args(["--players", "2", "--frames", "300", "--diverge", "1@100"])
        .args(["--topology", "relay"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn relay_flags_are_checked() {
    let bad = |args: &[&str]| Command::new(BIN).args(args).output().unwrap().status.code();
    assert_eq!(bad(&["--relay-ms", "10"]), Some(2));
    assert_eq!(bad(&["--topology", "mesh"]), Some(2));
}
