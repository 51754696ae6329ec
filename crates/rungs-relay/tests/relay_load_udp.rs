//! The short form of the load generator (`rungs-relay-load`): two 8-seat
//! matches against the real relay binary over loopback, created through its
//! admin socket. Checks that the tool works — every client welcomed, the
//! matches running, the relay's latency histograms and CPU time read —
//! never a timing figure (those are for `rungs-relay-load` runs, see
//! docs/relay.md).

#![cfg(target_os = "linux")]

use std::process::Command;

#[test]
fn load_generator_drives_the_relay_binary_and_reads_its_figures() {
    let relay = env!("CARGO_BIN_EXE_rungs-relay");
    let out = Command::new(env!("CARGO_BIN_EXE_rungs-relay-load"))
        .args([
            "--matches",
            "2",
            "--seconds",
            "2",
            "--warmup",
            "2",
            "--no-pin",
        ])
        .args(["--relay", relay])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("2 |"))
        .unwrap_or_else(|| panic!("no row for 2 matches: {text}"));
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    assert_eq!(cells[1], "2", "both matches running: {row}");
    assert_eq!(cells[2], "16 of     16", "every client welcomed: {row}");
    // The relay answered and its histograms counted something.
    let datagrams_per_s: f64 = cells[4].parse().unwrap();
    assert!(datagrams_per_s > 100.0, "{row}");
    let datagram: Vec<u64> = cells[5]
        .split('/')
        .map(|v| v.trim().parse().unwrap())
        .collect();
    assert!(datagram[3] > 0, "a datagram latency was measured: {row}");
    let processing: Vec<u64> = cells[6]
        .split('/')
        .map(|v| v.trim().parse().unwrap())
        .collect();
    assert!(processing[3] > 0 && processing[3] <= datagram[3], "{row}");
    // Turns kept coming: at least half of 30 ticks/s for 16 clients.
    let turns: Vec<f64> = cells[9]
        .split(" of ")
        .map(|v| v.trim().parse().unwrap())
        .collect();
    assert!(turns[0] > turns[1] / 2.0, "{row}");
}
