//! A relay that survives its own restart: the `rungs-relay` binary with
//! `--state`, three players over loopback, the relay killed with SIGKILL in
//! the middle of the match and started again with the same flags. Every
//! player resumes from its own horizon (no reload), every order submitted
//! before and after the restart runs exactly once, and every player ends
//! with the same turns. Then `rungs-relay export` writes the match's turn
//! log, which matches what the players ran.
//!
//! Prints how long the players were without a relay (the kill to every
//! player welcomed again): the figure `docs/relay.md` quotes.

#![cfg(unix)]

use crate::relay_process;

use std::collections::HashMap;
use std::net::UdpSocket;
use std::process::Command;
use std::time::{Duration, Instant};

use rungs_core::relay::{ClientConfig, ClientEvent, RelayClient, SeatTurn, Turn, TurnLog};
use rungs_core::wire::relay::{EntryKind, MatchOverReason};

use relay_process::{RelayProcess, BIN};

const SECRET: &str = "00112233445566778899aabbccddeeff";
const MATCH: u64 = 4343;

struct Player {
    socket: UdpSocket,
    client: RelayClient,
    turns: Vec<Turn>,
    events: Vec<ClientEvent>,
    submitted: Vec<Vec<u8>>,
    state: u64,
}

fn step(players: &mut [Player], now: u64, buf: &mut [u8]) {
    for (seat, p) in players.iter_mut().enumerate() {
        while let Ok((len, from)) = p.socket.recv_from(buf) {
            p.client.handle_datagram(now, from, &buf[..len]);
        }
        p.client.handle_timeout(now);
        while let Some(e) = p.client.poll_event() {
            p.events.push(e);
        }
        while let Some(turn) = p.client.next_turn() {
            for s in &turn.seats {
                if let SeatTurn::Order(o) = s {
                    p.state = o
                        .iter()
                        .fold(p.state, |h, b| h.wrapping_mul(31) ^ u64::from(*b));
                }
            }
            p.state = p.state.wrapping_mul(0x100_0000_01B3) ^ u64::from(turn.tick);
            if (turn.tick + 1) % 10 == 0 {
                p.client.report_checksum(turn.tick + 1, p.state);
            }
            // An order every 15 ticks from each seat, at different ticks.
            if turn.tick % 15 == seat as u32 * 5 && !p.client.is_closed() {
                let order = format!("seat {seat} order {}", p.submitted.len()).into_bytes();
                if p.client.submit_order(&order).is_ok() {
                    p.submitted.push(order);
                }
            }
            p.turns.push(turn);
        }
        while let Some((to, len)) = p.client.poll_transmit(now, buf) {
            let _ = p.socket.send_to(&buf[..len], to);
        }
    }
}

#[test]
fn a_relay_killed_mid_match_resumes_every_player_from_its_journal() {
    let setup = format!("match {MATCH} seats 3 humans 0,1,2 checksum_interval 10\n");
    let mut first =
        RelayProcess::serve_with("restart", SECRET, Some(&setup), &["--state", "{dir}/state"]);
    let address = first.address;
    let dir = first.dir.clone();
    let start = Instant::now();
    let now_us = || start.elapsed().as_micros() as u64;
    let mut players: Vec<Player> = (0..3u8)
        .map(|seat| {
            let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
            socket.set_nonblocking(true).unwrap();
            let credentials = relay_process::ticket(SECRET, MATCH, seat);
            let config = ClientConfig::new(credentials, address, 100 + u64::from(seat));
            let mut client = RelayClient::new(config, now_us()).unwrap();
            client.report_checksum(0, 0);
            Player {
                socket,
                client,
                turns: Vec::new(),
                events: Vec::new(),
                submitted: Vec::new(),
                state: 0,
            }
        })
        .collect();
    let mut buf = [0u8; 2048];
    // Three seconds of play, then SIGKILL.
    while start.elapsed() < Duration::from_secs(3) {
        step(&mut players, now_us(), &mut buf);
        std::thread::sleep(Duration::from_millis(1));
    }
    let ran_before: Vec<usize> = players.iter().map(|p| p.turns.len()).collect();
    assert!(ran_before.iter().all(|n| *n > 40), "{ran_before:?}");
    let killed_at = Instant::now();
    first.kill9();
    // Start again with the same flags, on the same address.
    let listen = address.to_string();
    let second = RelayProcess::serve_with(
        "restart",
        SECRET,
        Some(&setup),
        &["--state", "{dir}/state", "--listen", &listen],
    );
    assert_eq!(second.address, address);
    let restarted_after = killed_at.elapsed();
    let welcomes = |p: &Player| {
        p.events
            .iter()
            .filter(|e| matches!(e, ClientEvent::Welcomed { .. }))
            .count()
    };
    let mut back_after: Option<Duration> = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        step(&mut players, now_us(), &mut buf);
        if back_after.is_none() && players.iter().all(|p| welcomes(p) >= 2) {
            back_after = Some(killed_at.elapsed());
        }
        if back_after.is_some_and(|t| killed_at.elapsed() > t + Duration::from_secs(3)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let back_after = back_after.expect("every player welcomed again");
    eprintln!(
        "relay restart: killed, started again after {restarted_after:?}; every player welcomed again {back_after:?} after the kill"
    );
    // Everyone resumed from its own horizon: no reload.
    for p in &players {
        for e in &p.events {
            if let ClientEvent::Welcomed {
                reload, welcome, ..
            } = e
            {
                assert!(!reload, "seat {}: {welcome:?}", p.client.seat());
            }
        }
    }
    // Everyone quits; the match ends.
    for p in &mut players {
        p.client.quit().unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline
        && !players.iter().all(|p| {
            p.events
                .iter()
                .any(|e| matches!(e, ClientEvent::MatchOver { .. }))
        })
    {
        step(&mut players, now_us(), &mut buf);
        std::thread::sleep(Duration::from_millis(1));
    }
    for p in &players {
        assert!(
            p.events.iter().any(|e| matches!(
                e,
                ClientEvent::MatchOver {
                    reason: MatchOverReason::AllLeft,
                    ..
                }
            )),
            "seat {}: {:?}",
            p.client.seat(),
            p.events
        );
        assert!(!p.events.iter().any(|e| matches!(e, ClientEvent::Desync(_))));
    }
    // The same turns everywhere, each order exactly once.
    let reference = &players[0].turns;
    for p in &players[1..] {
        assert_eq!(&p.turns, reference, "seat {}", p.client.seat());
    }
    let mut counts: HashMap<&[u8], usize> = HashMap::new();
    for t in reference {
        for s in &t.seats {
            if let SeatTurn::Order(o) = s {
                *counts.entry(o).or_default() += 1;
            }
        }
    }
    for p in &players {
        for o in &p.submitted {
            assert_eq!(
                counts.get(o.as_slice()),
                Some(&1),
                "{}",
                String::from_utf8_lossy(o)
            );
        }
    }
    let (code, text) = {
        // Export the ended match before the relay is stopped.
        let out = dir.join("match.rlog");
        let exported = Command::new(BIN)
            .args(["export", "--state"])
            .arg(dir.join("state"))
            .args(["--match", &MATCH.to_string(), "--out"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            exported.status.success(),
            "{}",
            String::from_utf8_lossy(&exported.stderr)
        );
        let log = TurnLog::decode(&std::fs::read(&out).unwrap()).unwrap();
        let ran: Vec<(u32, u8, Vec<u8>)> = reference
            .iter()
            .flat_map(|t| {
                t.seats
                    .iter()
                    .enumerate()
                    .filter_map(move |(seat, s)| match s {
                        SeatTurn::Order(o) => Some((t.tick, seat as u8, o.clone())),
                        _ => None,
                    })
            })
            .collect();
        let logged: Vec<(u32, u8, Vec<u8>)> = log
            .entries
            .iter()
            .filter(|e| e.kind == EntryKind::Order)
            .map(|e| (e.tick, e.seat, e.payload.to_vec()))
            .collect();
        assert_eq!(logged, ran, "the exported log is what the players ran");
        assert_eq!(log.over, Some(MatchOverReason::AllLeft));
        second.stop()
    };
    assert_eq!(code, Some(0), "the match had finished: {text}");
    assert!(text.contains(&format!("match {MATCH} over")), "{text}");
    assert!(
        text.contains(&format!("match {MATCH} resumed from its journal")),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
