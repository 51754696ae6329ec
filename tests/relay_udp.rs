//! The `rungs-relay` binary over real loopback sockets: it issues tickets,
//! serves a match from its setup file to two `RelayClient`s, ignores junk
//! from a stranger, ends the match when both quit, and stops cleanly on
//! SIGTERM.

#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rungs::relay::ticket::Credentials;
use rungs::relay::{ClientConfig, ClientEvent, RelayClient, SeatTurn, Turn};
use rungs::wire::relay::MatchOverReason;

const SECRET: &str = "00112233445566778899aabbccddeeff";
const BIN: &str = env!("CARGO_BIN_EXE_rungs-relay");

fn ticket(seat: u8) -> Credentials {
    let out = Command::new(BIN)
        .args(["ticket", "--secret", SECRET, "--match", "4242", "--seat"])
        .arg(seat.to_string())
        .output()
        .unwrap();
    assert!(out.status.success());
    Credentials::from_text(&String::from_utf8(out.stdout).unwrap()).unwrap()
}

#[test]
fn relay_binary_serves_a_match_over_loopback_and_stops_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("rungs-relay-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let matches = dir.join("matches.txt");
    std::fs::write(
        &matches,
        "# test match\nmatch 4242 seats 3 humans 0,1 checksum_interval 10\n",
    )
    .unwrap();
    let mut relay = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--matches"])
        .arg(&matches)
        .env("RUNGS_RELAY_SECRET", SECRET)
        .env("RUNGS_RELAY_LOAD_WAIT_SECONDS", "5")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(relay.stderr.take().unwrap());
    let mut line = String::new();
    log.read_line(&mut line).unwrap();
    let address: SocketAddr = line
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));

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

    unsafe {
        libc::kill(relay.id() as libc::pid_t, libc::SIGTERM);
    }
    let status = relay.wait().unwrap();
    let rest: Vec<String> = log.lines().map_while(Result::ok).collect();
    let text = rest.join("\n");
    assert!(status.success(), "exit {status:?}\n{text}");
    assert!(
        text.contains("match 4242 started (everyone joined)"),
        "{text}"
    );
    assert!(text.contains("match 4242 over"), "{text}");
    assert!(text.contains("stopped:"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
