//! The short form of the attack run (`rungs-relay-attack --short`): every
//! attack of the tool against the real relay binary over loopback while an
//! honest match plays, 2 s each. Checks the invariants the tool judges —
//! nothing larger than what came in goes back to an unverified address, no
//! replayed Hello or forged ticket opens a connection, no honest order is
//! lost, doubled or forged, no honest player loses its connection — never
//! a timing figure (the full run and its table: `rungs-relay-attack`,
//! docs/relay.md "Security").

#![cfg(target_os = "linux")]

use std::process::Command;

#[test]
fn attacks_on_the_relay_binary_leave_the_honest_match_whole() {
    let out = Command::new(env!("CARGO_BIN_EXE_rungs-relay-attack"))
        .args(["--short", "--no-pin"])
        .args(["--relay", env!("CARGO_BIN_EXE_rungs-relay")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("FAIL"), "{text}");
    for phase in [
        "| baseline (no attack) |",
        "| replayed Hellos |",
        "| garbage flood |",
        "| replayed packets |",
        "| forged/expired/cross-match tickets |",
        "| orders claiming another seat |",
        "| oversized orders |",
        "| Hello storm, many addresses |",
        "| after (no attack) |",
    ] {
        assert!(text.contains(phase), "no row {phase}: {text}");
    }
    let judged = text.lines().filter(|l| l.starts_with("ok   ")).count();
    assert!(judged >= 20, "{judged} verdicts: {text}");
    assert!(
        text.contains(", 0 lost, 0 doubled, 0 under an honest seat"),
        "{text}"
    );
    assert!(
        text.contains("honest players reconnected 0 times"),
        "{text}"
    );
}
