//! The operator's side of the `rungs-relay` binary (docs/relay-operations.md):
//! `--metrics` scraped while real clients play over loopback, its figures
//! checked against what the clients sent and saw; `/health` 200, then 503
//! while draining; SIGTERM with matches going (they play on, then end at
//! the drain's deadline: exit 3), with matches that finish during the drain
//! (exit 0), and with no match (exit 0 at once).
//!
//! No timing figure is asserted: the waits are bounds on a test that would
//! otherwise hang.

#![cfg(unix)]

use crate::relay_process;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use rungs_core::relay::{ClientConfig, ClientEvent, RelayClient};
use rungs_core::wire::relay::{MatchOverReason, RejectReason};

use relay_process::RelayProcess;

const SECRET: &str = "fedcba9876543210fedcba9876543210";

/// A client on its own socket, counting the datagrams it sent and received.
struct Player {
    socket: UdpSocket,
    client: RelayClient,
    turns: usize,
    events: Vec<ClientEvent>,
    sent: u64,
    received: u64,
    /// The last datagram sent, to replay.
    last_sent: Vec<u8>,
}

fn player(match_id: u64, seat: u8, relay: SocketAddr, now: u64) -> Player {
    let credentials = relay_process::ticket(SECRET, match_id, seat);
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_nonblocking(true).unwrap();
    let config = ClientConfig::new(credentials, relay, match_id * 16 + u64::from(seat) + 1);
    Player {
        socket,
        client: RelayClient::new(config, now).unwrap(),
        turns: 0,
        events: Vec::new(),
        sent: 0,
        received: 0,
        last_sent: Vec::new(),
    }
}

impl Player {
    fn step(&mut self, now: u64) {
        let mut buf = [0u8; 1500];
        while let Ok((len, from)) = self.socket.recv_from(&mut buf) {
            self.received += 1;
            self.client.handle_datagram(now, from, &buf[..len]);
        }
        self.client.handle_timeout(now);
        while let Some(e) = self.client.poll_event() {
            self.events.push(e);
        }
        while self.client.next_turn().is_some() {
            self.turns += 1;
        }
        while let Some((to, len)) = self.client.poll_transmit(now, &mut buf) {
            if self.socket.send_to(&buf[..len], to).is_ok() {
                self.sent += 1;
                self.last_sent = buf[..len].to_vec();
            }
        }
    }

    /// Count what is still waiting in its socket, without acting on it.
    fn count_waiting(&mut self) {
        let mut buf = [0u8; 1500];
        while self.socket.recv_from(&mut buf).is_ok() {
            self.received += 1;
        }
    }

    fn over(&self) -> Option<MatchOverReason> {
        self.events.iter().find_map(|e| match e {
            ClientEvent::MatchOver { reason, .. } => Some(*reason),
            _ => None,
        })
    }

    fn rejected(&self) -> Option<RejectReason> {
        self.events.iter().find_map(|e| match e {
            ClientEvent::Rejected(reason) => Some(*reason),
            _ => None,
        })
    }
}

/// Step every player every 2 ms until `done` or `limit` passed.
fn play(
    players: &mut [Player],
    now_us: &dyn Fn() -> u64,
    limit: Duration,
    mut done: impl FnMut(&[Player]) -> bool,
) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        for p in players.iter_mut() {
            p.step(now_us());
        }
        if done(players) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

/// `GET path` over HTTP/1.1: the status and the body.
fn http_get(address: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: relay\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}

/// One scrape of `/metrics`.
struct Scrape(String);

impl Scrape {
    fn take(address: SocketAddr) -> Scrape {
        let (status, body) = http_get(address, "/metrics");
        assert_eq!(status, 200, "{body}");
        assert!(body.ends_with("# EOF\n"), "a whole OpenMetrics message");
        Scrape(body)
    }

    /// The value of the sample written `name` (with its labels).
    fn value(&self, name: &str) -> u64 {
        self.0
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no sample {name} in\n{}", self.0))
            .parse::<f64>()
            .unwrap() as u64
    }
}

/// Scrape until `test` holds (the relay publishes every 100 ms), or panic
/// with the last scrape after 10 s.
fn scrape_until(address: SocketAddr, what: &str, test: impl Fn(&Scrape) -> bool) -> Scrape {
    let start = Instant::now();
    loop {
        let scrape = Scrape::take(address);
        if test(&scrape) {
            return scrape;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "never {what}:\n{}",
            scrape.0
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn metrics_agree_with_what_the_clients_sent_and_saw() {
    let mut relay = RelayProcess::serve_with(
        "relay-metrics",
        SECRET,
        Some("match 801 seats 2 humans 0,1\nmatch 802 seats 3 humans 0,1\n"),
        &["--metrics", "127.0.0.1:0"],
    );
    let metrics = relay.metrics_address();
    let start = Instant::now();
    let now_us = || start.elapsed().as_micros() as u64;
    let mut players = vec![
        player(801, 0, relay.address, now_us()),
        player(801, 1, relay.address, now_us()),
        player(802, 0, relay.address, now_us()),
        player(802, 1, relay.address, now_us()),
        // A ticket for a match the relay does not hold.
        player(899, 0, relay.address, now_us()),
    ];
    // Datagrams that are not rungs': dropped as `not_relay`.
    let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
    const JUNK: u64 = 5;
    for _ in 0..JUNK {
        junk.send_to(&[0u8; 20], relay.address).unwrap();
    }
    let everyone_plays = |ps: &[Player]| ps[..4].iter().all(|p| p.turns > 30);
    assert!(
        play(
            &mut players,
            &now_us,
            Duration::from_secs(10),
            everyone_plays
        ),
        "matches run"
    );
    assert_eq!(players[4].rejected(), Some(RejectReason::UnknownMatch));
    // A packet the relay has taken, sent again: its link drops the copies
    // as replays.
    const REPLAYS: u64 = 3;
    let replayed = players[0].last_sent.clone();
    assert_eq!(replayed[0], 0xB7, "a transport packet");
    for _ in 0..REPLAYS {
        players[0].socket.send_to(&replayed, relay.address).unwrap();
        players[0].sent += 1;
    }

    // While they play.
    let during = scrape_until(metrics, "both matches running", |s| {
        s.value("rungs_relay_matches{state=\"running\"}") == 2
    });
    assert_eq!(during.value("rungs_relay_matches_started_total"), 2);
    assert_eq!(during.value("rungs_relay_seats{presence=\"connected\"}"), 4);
    assert_eq!(during.value("rungs_relay_seats{presence=\"ai\"}"), 1);
    assert_eq!(during.value("rungs_relay_connections"), 4);
    assert_eq!(during.value("rungs_relay_draining"), 0);
    assert!(during.value("rungs_relay_datagrams_received_total") > 100);
    for histogram in [
        "rungs_relay_datagram_latency_seconds",
        "rungs_relay_processing_latency_seconds",
        "rungs_relay_timer_lateness_seconds",
    ] {
        let count = during.value(&format!("{histogram}_count"));
        assert!(count > 0, "{histogram} measured");
        assert_eq!(
            during.value(&format!("{histogram}_bucket{{le=\"+Inf\"}}")),
            count
        );
    }
    assert_eq!((http_get(metrics, "/health").0), 200);

    // Everyone quits; both matches end; the relay closes every connection
    // (after its linger), and then the figures are final.
    for p in &mut players[..4] {
        p.client.quit().unwrap();
    }
    let all_over = |ps: &[Player]| ps[..4].iter().all(|p| p.over().is_some());
    assert!(play(
        &mut players,
        &now_us,
        Duration::from_secs(10),
        all_over
    ));
    let closed = |_: &[Player]| Scrape::take(metrics).value("rungs_relay_connections") == 0;
    assert!(play(&mut players, &now_us, Duration::from_secs(10), closed));
    // Nothing is sent to a closed connection: what the relay sent has
    // arrived once a publish shows no change.
    let mut last = Scrape::take(metrics);
    let after = loop {
        std::thread::sleep(Duration::from_millis(250));
        let now = Scrape::take(metrics);
        let moved = |name: &str| now.value(name) != last.value(name);
        if !moved("rungs_relay_datagrams_received_total")
            && !moved("rungs_relay_datagrams_sent_total")
        {
            break now;
        }
        last = now;
    };
    for p in &mut players {
        p.count_waiting();
    }
    let sent: u64 = players.iter().map(|p| p.sent).sum::<u64>() + JUNK;
    let received: u64 = players.iter().map(|p| p.received).sum();
    let relay_in = after.value("rungs_relay_datagrams_received_total");
    let relay_out = after.value("rungs_relay_datagrams_sent_total");
    println!(
        "clients sent {sent}, relay received {relay_in}; relay sent {relay_out}, clients received {received}"
    );
    // Loopback UDP may drop under a burst (it has not in runs here): the
    // relay can count fewer than were sent, by at most 1 %, never more.
    let within = |counted: u64, total: u64| counted <= total && total - counted <= total / 100;
    assert!(within(relay_in, sent), "in: {relay_in} of {sent}");
    assert!(
        within(received, relay_out),
        "out: {received} of {relay_out}"
    );
    assert_eq!(
        after.value("rungs_relay_matches_ended_total{reason=\"all_left\"}"),
        2
    );
    assert_eq!(after.value("rungs_relay_matches{state=\"over\"}"), 2);
    assert_eq!(after.value("rungs_relay_seats{presence=\"connected\"}"), 0);
    assert_eq!(after.value("rungs_relay_connections_opened_total"), 4);
    // Every Hello of the stranger was refused (no cookie is sent first to
    // a ticket for an unknown match), and every junk datagram dropped.
    assert_eq!(
        after.value("rungs_relay_tickets_refused_total{reason=\"unknown_match\"}"),
        players[4].sent
    );
    assert_eq!(
        after.value("rungs_relay_datagrams_dropped_total{reason=\"not_relay\"}"),
        JUNK
    );
    assert_eq!(
        after.value("rungs_relay_datagrams_dropped_total{reason=\"link_replayed\"}"),
        REPLAYS
    );

    let (code, log) = relay.stop();
    assert_eq!(code, Some(0), "every match had finished: {log}");
}

/// Send one admin command line; the reply's first line.
fn admin_command(path: &std::path::Path, line: &str) -> String {
    let mut stream = UnixStream::connect(path).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    writeln!(stream, "{line}").unwrap();
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    while stream.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        reply.push(byte[0]);
    }
    String::from_utf8(reply).unwrap()
}

#[test]
fn draining_answers_503_and_ends_matches_still_going_at_its_deadline() {
    let mut relay = RelayProcess::serve_with(
        "relay-drain-deadline",
        SECRET,
        Some("match 811 seats 2 humans 0,1\n"),
        &[
            "--metrics",
            "127.0.0.1:0",
            "--admin",
            "{dir}/admin.sock",
            "--drain-seconds",
            "2",
        ],
    );
    let metrics = relay.metrics_address();
    let admin = relay.dir.join("admin.sock");
    let start = Instant::now();
    let now_us = || start.elapsed().as_micros() as u64;
    let mut players: Vec<Player> = (0..2)
        .map(|seat| player(811, seat, relay.address, now_us()))
        .collect();
    let playing = |ps: &[Player]| ps.iter().all(|p| p.turns > 20);
    assert!(play(
        &mut players,
        &now_us,
        Duration::from_secs(10),
        playing
    ));
    assert_eq!(http_get(metrics, "/health"), (200, "serving\n".into()));

    relay.signal(libc::SIGTERM);
    let turns_at_signal = players[0].turns;
    let draining = |_: &[Player]| http_get(metrics, "/health").0 == 503;
    assert!(play(
        &mut players,
        &now_us,
        Duration::from_secs(5),
        draining
    ));
    assert_eq!(http_get(metrics, "/health").1, "draining\n");
    let scrape = scrape_until(metrics, "draining", |s| {
        s.value("rungs_relay_draining") == 1
    });
    assert_eq!(scrape.value("rungs_relay_matches{state=\"running\"}"), 1);
    assert_eq!(
        admin_command(&admin, "create 812 seats 2 humans 0,1"),
        "error the relay is draining: it takes no new matches"
    );
    assert!(admin_command(&admin, "list").starts_with("match 811 running"));

    // The match plays on until the deadline ends it.
    let ended = |ps: &[Player]| ps.iter().all(|p| p.over().is_some());
    assert!(play(&mut players, &now_us, Duration::from_secs(10), ended));
    assert!(
        players[0].turns > turns_at_signal,
        "played during the drain"
    );
    for p in &players {
        assert_eq!(p.over(), Some(MatchOverReason::Ended));
    }
    let (code, log) = relay.wait_exit(Duration::from_secs(10));
    assert_eq!(code, Some(3), "a match was ended at the deadline: {log}");
    assert!(
        log.contains("drain deadline: ended 1 match(es) still going"),
        "{log}"
    );
    assert!(
        log.contains("exit 3 (1 match(es) ended at the drain deadline)"),
        "{log}"
    );
}

#[test]
fn matches_that_finish_during_the_drain_make_it_exit_0() {
    let relay = RelayProcess::serve_with(
        "relay-drain-finish",
        SECRET,
        Some("match 821 seats 2 humans 0,1\n"),
        &["--drain-seconds", "60"],
    );
    let start = Instant::now();
    let now_us = || start.elapsed().as_micros() as u64;
    let mut players: Vec<Player> = (0..2)
        .map(|seat| player(821, seat, relay.address, now_us()))
        .collect();
    let playing = |ps: &[Player]| ps.iter().all(|p| p.turns > 20);
    assert!(play(
        &mut players,
        &now_us,
        Duration::from_secs(10),
        playing
    ));
    relay.signal(libc::SIGTERM);
    let more = players[0].turns + 20;
    assert!(play(&mut players, &now_us, Duration::from_secs(10), |ps| {
        ps[0].turns > more
    }));
    for p in &mut players {
        p.client.quit().unwrap();
    }
    let ended = |ps: &[Player]| ps.iter().all(|p| p.over().is_some());
    assert!(play(&mut players, &now_us, Duration::from_secs(10), ended));
    for p in &players {
        assert_eq!(p.over(), Some(MatchOverReason::AllLeft));
    }
    // Well before the 60 s deadline.
    let (code, log) = relay.wait_exit(Duration::from_secs(20));
    assert_eq!(code, Some(0), "every match finished: {log}");
    assert!(log.contains("drained: every match is over"), "{log}");
}

#[test]
fn sigterm_with_no_match_exits_0_without_waiting_for_the_deadline() {
    let relay = RelayProcess::serve_with(
        "relay-drain-empty",
        SECRET,
        None,
        &["--admin", "{dir}/admin.sock", "--drain-seconds", "300"],
    );
    relay.signal(libc::SIGTERM);
    let (code, log) = relay.wait_exit(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("0 match(es) going"), "{log}");
}
