//! `rungs-relay-load`: load a real `rungs-relay` process over loopback UDP
//! and measure what it adds.
//!
//! For each match count N it starts `rungs-relay serve` pinned to one core
//! (`taskset -c RELAY_CPU`), creates N matches of 8 human seats at 30 ticks/s
//! through the relay's admin socket, and plays them with 8·N real
//! `RelayClient`s in this process (pinned to another core), sharing a few
//! UDP sockets (the relay routes by connection id, so many clients behind
//! one address cost it nothing more than clients on their own ports). Each
//! player submits a 20-byte order every 15 ticks on average (120 APM) and
//! reports a checksum every 30 ticks, like `benches/relay_load.rs`.
//!
//! After a warm-up (everyone joined, every match running) it measures for
//! the given seconds:
//!
//! * the relay's own latency histograms (admin `latency`): per datagram,
//!   kernel receive timestamp (or `recv` returning: "processing") to
//!   everything it caused being sent; per timer (bundles at tick starts),
//!   due time to sent — the relay-added latency;
//! * the relay's CPU time from `/proc/PID/stat` over the window;
//! * datagrams per second (admin `counters`);
//! * client side: turns executed per second against the 30·8·N expected,
//!   and order submit → the turn carrying it received (this includes the
//!   wait for the tick the relay scheduled and this process's own loop, so
//!   it is context, not the relay's share).
//!
//! Two verdicts per match count: "relay p99 < 2 ms" (its processing and
//! timer-lateness p99s: the relay-added latency) and "kept up" (every
//! client welcomed, ≥ 95 % of the expected turns, orders back within two
//! ticks: the whole path, generator included, held the load). The exit
//! status is 1 when the run did not work (clients not welcomed, no turns,
//! the relay died), never because of a timing figure.
//!
//! `rungs-relay-load --matches 100,250,500 --seconds 10` (release build).

#[cfg(target_os = "linux")]
mod load;
#[cfg(target_os = "linux")]
#[allow(dead_code)] // shared with rungs-relay-attack: each uses a part of it
mod relay_under_test;

#[cfg(target_os = "linux")]
fn main() -> std::process::ExitCode {
    load::main()
}

#[cfg(not(target_os = "linux"))]
fn main() -> std::process::ExitCode {
    eprintln!("rungs-relay-load runs on Linux (taskset, /proc, Unix-domain sockets)");
    std::process::ExitCode::from(2)
}
