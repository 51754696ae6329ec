//! `rungs-relay-attack`: attack a real `rungs-relay` process over loopback
//! while an honest match plays on it, and measure what the attacks did.
//!
//! It starts `rungs-relay serve` (pinned to one core, the attackers and
//! players on the other), creates an honest match of 5 seats at 30 ticks/s
//! through the admin socket — four honest `RelayClient`s and a fifth seat
//! held by the attacker, a player with a genuine ticket and a hand-made
//! client — and a victim match whose seat 0 has connected ten times, every
//! Hello captured. Then, one phase each, measured:
//!
//! 1. **baseline**: no attack;
//! 2. **garbage flood**: random datagrams, some with a live connection id;
//! 3. **replayed packets**: the honest players' captured transport packets
//!    replayed from other addresses;
//! 4. **replayed Hellos**: every captured Hello of the victim and of the
//!    honest players, from other addresses and from the victim's own;
//! 5. **forged tickets**: forged, expired, unknown-match and cross-match
//!    tickets, with and without made-up cookies;
//! 6. **seat claims**: the attacker's packets claiming an honest seat, on
//!    its own connection and on the honest seat's connection id;
//! 7. **oversized orders**: orders over 512 bytes, lengths that lie,
//!    datagrams of 1,400 and 9,000 bytes;
//! 8. **Hello storm**: Hellos with the attacker's ticket and fresh nonces
//!    from many source addresses (127.1.x.y) that never answer a cookie,
//!    and a churn of connections from 16 addresses that do;
//! 9. **after**: no attack.
//!
//! Per phase: attack datagrams and bytes sent, bytes the unverified
//! addresses got back (must not exceed what they sent), the relay's own
//! `unverified_bytes_in/out`, connections opened, the honest orders' submit
//! → executed latency (p50/p99), honest reconnects, the relay's CPU and
//! resident memory. At the end: every honest order executed exactly once
//! by every honest player, no order under an honest seat that its player
//! did not submit, every replayed Hello refused. The exit status is 1 when
//! one of those invariants fails (or the run did not work), never because
//! of a timing figure.
//!
//! `rungs-relay-attack` (20 s per phase) or `--short` (2 s, what
//! `tests/relay_attack_udp.rs` runs).

#[cfg(target_os = "linux")]
mod attack;
#[cfg(target_os = "linux")]
#[path = "../rungs-relay-load/relay_under_test.rs"]
#[allow(dead_code)] // each tool uses a part of it
mod relay_under_test;

#[cfg(target_os = "linux")]
fn main() -> std::process::ExitCode {
    attack::main()
}

#[cfg(not(target_os = "linux"))]
fn main() -> std::process::ExitCode {
    eprintln!("rungs-relay-attack runs on Linux (taskset, /proc, Unix-domain sockets)");
    std::process::ExitCode::from(2)
}
