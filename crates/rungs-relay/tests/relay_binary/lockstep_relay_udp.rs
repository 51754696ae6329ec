//! A relay-topology `LockstepSession` on real loopback sockets: three
//! `LockstepDriver`s (the update loop engines and the C API use) and one bare
//! `RelayClient` on a `UdpDriver` play a match served by the `rungs-relay`
//! binary. All execute the same commands on the same frames, report
//! checksums without a desync, and leave; the relay ends the match.

#![cfg(unix)]

use crate::relay_process;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rungs_core::relay::{ClientConfig, ClientEvent, RelayClient, SeatTurn};
use rungs_core::session::{Advance, LockstepConfig, LockstepSession, RelaySettings, SessionEvent};
use rungs_core::timing::MachineConfig;
use rungs_net::{LockstepDriver, UdpDriver};

use relay_process::{ticket, RelayProcess};

const SECRET: &str = "8899aabbccddeeff0011223344556677";
const MATCH: u64 = 5151;
const CHECKSUM_INTERVAL: u32 = 10;

struct Engine {
    driver: LockstepDriver,
    /// (frame, seat, bytes) of every command executed.
    commands: Vec<(u32, u8, Vec<u8>)>,
    frames: u32,
    state: u64,
    events: Vec<SessionEvent>,
    submitted: u32,
    left: bool,
}

#[test]
fn relay_topology_sessions_play_a_match_over_loopback() {
    let relay = RelayProcess::serve(
        "lockstep-relay-test",
        SECRET,
        "match 5151 seats 4 humans 0,1,2,3 checksum_interval 10\n",
    );
    let start = Instant::now();
    let now_us = || start.elapsed().as_micros() as u64;
    let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut engines: Vec<Engine> = (0..3u8)
        .map(|seat| {
            let config = LockstepConfig::relay(
                MachineConfig::adaptive(30, vec![true; 4], Some(seat)),
                CHECKSUM_INTERVAL,
                RelaySettings::new(
                    relay.address,
                    ticket(SECRET, MATCH, seat),
                    0x1234 + u64::from(seat),
                ),
            );
            let session = LockstepSession::new(&config, now_us()).unwrap();
            Engine {
                driver: LockstepDriver::bind(loopback, session).unwrap(),
                commands: Vec::new(),
                frames: 0,
                state: 0,
                events: Vec::new(),
                submitted: 0,
                left: false,
            }
        })
        .collect();
    // Seat 3: a bare client on the plain UDP driver.
    let bare_config = ClientConfig::new(ticket(SECRET, MATCH, 3), relay.address, 99);
    let mut bare =
        UdpDriver::bind(loopback, RelayClient::new(bare_config, now_us()).unwrap()).unwrap();
    let mut bare_orders: Vec<(u32, u8, Vec<u8>)> = Vec::new();
    let mut bare_over = false;
    let mut bare_quit = false;

    while start.elapsed() < Duration::from_secs(10) {
        let now = now_us();
        for (seat, e) in engines.iter_mut().enumerate() {
            if e.left {
                continue;
            }
            loop {
                let mut ran = Vec::new();
                let wake = e
                    .driver
                    .update(now, |frame, c| ran.push((frame, c.seat, c.bytes.clone())))
                    .unwrap();
                for c in ran {
                    e.state = e.state.wrapping_mul(31) ^ u64::from(c.0) ^ u64::from(c.2[1]) << 8;
                    e.commands.push(c);
                }
                match wake.advance {
                    Advance::Ran { frame } => {
                        e.frames = frame + 1;
                        let s = e.driver.session_mut();
                        if s.is_checksum_frame(frame) {
                            s.submit_checksum(frame, e.state).unwrap();
                        }
                    }
                    Advance::Left => {
                        e.left = true;
                        break;
                    }
                    _ => break,
                }
            }
            while let Some(ev) = e.driver.session_mut().poll_event() {
                e.events.push(ev);
            }
            if e.frames > 10 && e.submitted < 8 && e.frames % 4 == seat as u32 {
                let order = [seat as u8, e.submitted as u8];
                e.driver.session_mut().submit_command(&order).unwrap();
                e.submitted += 1;
            }
            // Leave once every seat's orders have executed here: on a loaded
            // machine a seat may run many frames per turn of this loop and
            // submit its last orders late.
            if e.submitted == 8
                && e.commands.len() == 24
                && e.frames > 90
                && !e.driver.session().has_left()
            {
                let _ = e.driver.session_mut().leave();
            }
        }
        bare.poll(now);
        let client = bare.inner_mut();
        while let Some(ev) = client.poll_event() {
            bare_over |= matches!(ev, ClientEvent::MatchOver { .. });
        }
        while let Some(turn) = client.next_turn() {
            for (seat, s) in turn.seats.iter().enumerate() {
                if let SeatTurn::Order(bytes) = s {
                    bare_orders.push((turn.tick, seat as u8, bytes.clone()));
                }
            }
            if turn.tick >= 95 && bare_orders.len() == 24 && !bare_quit {
                client.quit().unwrap();
                bare_quit = true;
            }
        }
        bare.poll(now);
        if bare_over && engines.iter().all(|e| e.left) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }

    for (seat, e) in engines.iter().enumerate() {
        assert!(e.left, "seat {seat} left (frames {})", e.frames);
        assert_eq!(e.commands.len(), 24, "seat {seat}: {:?}", e.commands);
        assert_eq!(e.commands, engines[0].commands, "seat {seat}");
        assert!(
            !e.events
                .iter()
                .any(|ev| matches!(ev, SessionEvent::Desync { .. })),
            "seat {seat}: {:?}",
            e.events
        );
        let removed = e
            .events
            .iter()
            .filter(|ev| matches!(ev, SessionEvent::PlayerRemoved { .. }))
            .count();
        assert!(removed >= 1, "seat {seat} saw its own removal");
    }
    assert_eq!(bare_orders, engines[0].commands, "the bare client's turns");
    assert!(bare_over, "the match ended");
    let (code, text) = relay.stop();
    assert_eq!(code, Some(0), "the match had finished: {text}");
    assert!(text.contains("match 5151 over"), "{text}");
}
