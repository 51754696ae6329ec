//! The `rungs-relay` binary over real loopback sockets: it issues tickets,
//! serves a match from its setup file to two `RelayClient`s, ignores junk
//! from a stranger, ends the match when both quit, and stops cleanly on
//! SIGTERM.

#![cfg(unix)]

use crate::relay_process;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use rungs_core::relay::ticket::Credentials;
use rungs_core::relay::{ClientConfig, ClientEvent, RelayClient, SeatTurn, Turn};
use rungs_core::wire::relay::MatchOverReason;

use relay_process::RelayProcess;

const SECRET: &str = "00112233445566778899aabbccddeeff";

fn ticket(seat: u8) -> Credentials {
    relay_process::ticket(SECRET, 4242, seat)
}

#[test]
fn relay_binary_serves_a_match_over_loopback_and_stops_on_sigterm() {
    let relay = RelayProcess::serve(
        "relay-test",
        SECRET,
        "# test match\nmatch 4242 seats 3 humans 0,1 checksum_interval 10\n",
    );
    let address = relay.address;

    let start = Instant::now();
    let now_us = || start.elapsed().as_micros() as u64;
    let mut players: Vec<(UdpSocket, RelayClient, Vec<Turn>, Vec<ClientEvent>)> = (0..2u8)
        .map(|seat| {
            let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
            socket.set_nonblocking(true).unwrap();
            let config = ClientConfig::new(ticket(seat), address, 7 + u64::from(seat));
            let client = RelayClient::new(config, now_us()).unwrap();
            (socket, client, Vec::new(), Vec::new())
        })
        .collect();
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut buf = [0u8; 1500];
    let mut submitted = 0;
    let mut quit = false;
    while start.elapsed() < Duration::from_secs(8) {
        let now = now_us();
        for (i, (socket, client, turns, events)) in players.iter_mut().enumerate() {
            while let Ok((len, from)) = socket.recv_from(&mut buf) {
                client.handle_datagram(now, from, &buf[..len]);
            }
            client.handle_timeout(now);
            while let Some(e) = client.poll_event() {
                events.push(e);
            }
            while let Some(turn) = client.next_turn() {
                if turn.tick % 10 == 0 {
                    client.report_checksum(turn.tick, u64::from(turn.tick));
                }
                turns.push(turn);
            }
            if client.is_connected() && submitted < 10 && i == 0 && turns.len() > 5 {
                client
                    .submit_order(format!("order {submitted}").as_bytes())
                    .unwrap();
                submitted += 1;
            }
            while let Some((to, len)) = client.poll_transmit(now, &mut buf) {
                let _ = socket.send_to(&buf[..len], to);
            }
        }
        let _ = stranger.send_to(&[0xB8, 1, 1, 0, 1, 2, 3], address);
        let _ = stranger.send_to(&[0xB7; 64], address);
        let all_ran = players.iter().all(|p| p.2.len() > 60);
        if all_ran && submitted == 10 && !quit {
            quit = true;
            for p in &mut players {
                p.1.quit().unwrap();
            }
        }
        let over = players.iter().all(|p| {
            p.3.iter().any(|e| {
                matches!(
                    e,
                    ClientEvent::MatchOver {
                        reason: MatchOverReason::AllLeft,
                        ..
                    }
                )
            })
        });
        if over {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    for (_, _, turns, events) in &players {
        assert!(
            events
                .iter()
                .any(|e| matches!(e, ClientEvent::MatchOver { .. })),
            "match over: {events:?}"
        );
        let orders: Vec<&SeatTurn> = turns
            .iter()
            .map(|t| &t.seats[0])
            .filter(|s| matches!(s, SeatTurn::Order(_)))
            .collect();
        assert_eq!(orders.len(), 10);
        assert!(turns.iter().all(|t| t.seats[2] == SeatTurn::Ai));
    }
    let (a, b) = (&players[0].2, &players[1].2);
    assert_eq!(a, b, "both clients executed the same turns");
    assert!(players
        .iter()
        .all(|p| !p.3.iter().any(|e| matches!(e, ClientEvent::Desync(_)))));

    let (code, text) = relay.stop();
    assert_eq!(code, Some(0), "the match had finished: {text}");
    assert!(
        text.contains("match 4242 started (everyone joined)"),
        "{text}"
    );
    assert!(text.contains("match 4242 over"), "{text}");
    assert!(text.contains("stopped:"), "{text}");
}
