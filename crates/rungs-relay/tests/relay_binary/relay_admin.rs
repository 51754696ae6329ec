//! The `rungs-relay` admin socket, driven against the real binary: matches
//! created, listed and ended through it while real clients play over
//! loopback; bad commands get one error line and touch no match; the
//! counters count; the socket is owner-only and removed on exit.

#![cfg(unix)]

use crate::relay_process;

use std::io::{BufRead, BufReader, Write};
use std::net::UdpSocket;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use rungs_core::relay::{ClientConfig, ClientEvent, RelayClient, Turn};
use rungs_core::wire::relay::{MatchOverReason, RejectReason};

use relay_process::RelayProcess;

const SECRET: &str = "0123456789abcdef0123456789abcdef";

/// An admin connection: send a line, read the reply up to its `ok`/`error` line.
struct Admin {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
}

impl Admin {
    fn connect(path: &Path) -> Admin {
        let start = Instant::now();
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) if start.elapsed() < Duration::from_secs(5) => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("admin socket {}: {e}", path.display()),
            }
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        Admin {
            writer: stream.try_clone().unwrap(),
            reader: BufReader::new(stream),
        }
    }

    /// The reply's data lines and its final line.
    fn command(&mut self, line: &str) -> (Vec<String>, String) {
        self.writer
            .write_all(format!("{line}\n").as_bytes())
            .unwrap();
        let mut data = Vec::new();
        loop {
            let mut reply = String::new();
            assert!(self.reader.read_line(&mut reply).unwrap() > 0, "closed");
            let reply = reply.trim_end().to_string();
            if reply.starts_with("ok") || reply.starts_with("error") {
                return (data, reply);
            }
            data.push(reply);
        }
    }

    fn counter(&mut self, name: &str) -> u64 {
        let (lines, end) = self.command("counters");
        assert_eq!(end, "ok");
        lines
            .iter()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in {lines:?}"))
            .parse()
            .unwrap()
    }
}

struct Player {
    socket: UdpSocket,
    client: RelayClient,
    turns: Vec<Turn>,
    events: Vec<ClientEvent>,
}

fn player(match_id: u64, seat: u8, relay: std::net::SocketAddr, now: u64) -> Player {
    let credentials = relay_process::ticket(SECRET, match_id, seat);
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_nonblocking(true).unwrap();
    let config = ClientConfig::new(credentials, relay, match_id * 16 + u64::from(seat) + 1);
    Player {
        socket,
        client: RelayClient::new(config, now).unwrap(),
        turns: Vec::new(),
        events: Vec::new(),
    }
}

fn step(players: &mut [Player], now: u64) {
    let mut buf = [0u8; 1500];
    for p in players {
        while let Ok((len, from)) = p.socket.recv_from(&mut buf) {
            p.client.handle_datagram(now, from, &buf[..len]);
        }
        p.client.handle_timeout(now);
        while let Some(e) = p.client.poll_event() {
            p.events.push(e);
        }
        while let Some(turn) = p.client.next_turn() {
            p.turns.push(turn);
        }
        while let Some((to, len)) = p.client.poll_transmit(now, &mut buf) {
            let _ = p.socket.send_to(&buf[..len], to);
        }
    }
}

fn over(p: &Player) -> Option<MatchOverReason> {
    p.events.iter().find_map(|e| match e {
        ClientEvent::MatchOver { reason, .. } => Some(*reason),
        _ => None,
    })
}

#[test]
fn admin_socket_creates_lists_and_ends_matches_of_the_running_binary() {
    let relay = RelayProcess::serve_with(
        "relay-admin",
        SECRET,
        None,
        &["--admin", "{dir}/admin.sock"],
    );
    let path = relay.dir.join("admin.sock");
    let mut admin = Admin::connect(&path);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "owner-only socket");

    // Two matches through the socket, the same fields as the setup file.
    assert_eq!(
        admin
            .command("create 501 seats 2 humans 0,1 checksum_interval 10")
            .1,
        "ok match 501 created"
    );
    assert_eq!(
        admin
            .command("create match 502 seats 3 humans 0,1 ai_order_delay 8")
            .1,
        "ok match 502 created"
    );
    // Bad commands: one clear error line each, nothing changes.
    for (command, expected) in [
        ("create 501 seats 2 humans 0", "error match 501: "),
        ("create 503 seats 2 humans 0,7", "error create: "),
        (
            "create 503 seats two humans 0",
            "error create: `seats` value `two`",
        ),
        (
            "create 503 seats 2 humans 0 tick_rate_millihz 1000000000",
            "error create: `tick_rate_millihz` must be 1000 to 120000, got 1000000000",
        ),
        (
            "create 18446744073709551615 seats 2 humans 0",
            "error create: `match` must be 1 to 9223372036854775807, got 18446744073709551615",
        ),
        ("end 999", "error no match 999"),
        ("end", "error end needs a match id"),
        ("launch 501", "error unknown command `launch`; try help"),
    ] {
        let (data, end) = admin.command(command);
        assert!(data.is_empty(), "{command}: {data:?}");
        assert!(end.starts_with(expected), "{command}: {end}");
    }
    let (lines, end) = admin.command("list");
    assert_eq!(end, "ok 2 matches");
    assert_eq!(
        lines,
        [
            "match 501 loading tick 0 horizon 0 seats loading,loading orders 0 desyncs 0",
            "match 502 loading tick 0 horizon 0 seats loading,loading,ai orders 0 desyncs 0",
        ]
    );
    let (help, end) = admin.command("help");
    assert_eq!(end, "ok");
    assert!(help.iter().any(|l| l.contains("counters")), "{help:?}");

    // Real clients play both matches over loopback.
    let start = Instant::now();
    let now_us = || start.elapsed().as_micros() as u64;
    let mut players: Vec<Player> = [(501, 0), (501, 1), (502, 0), (502, 1)]
        .iter()
        .map(|&(m, s)| player(m, s, relay.address, now_us()))
        .collect();
    let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
    while start.elapsed() < Duration::from_secs(8) {
        step(&mut players, now_us());
        let _ = junk.send_to(&[0xB8, 1, 1, 0, 9], relay.address);
        if players.iter().all(|p| p.turns.len() > 30) {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(players.iter().all(|p| p.turns.len() > 30), "matches run");
    let (lines, _) = admin.command("list");
    assert!(
        lines[0].starts_with("match 501 running") && lines[0].contains("seats connected,connected"),
        "{lines:?}"
    );
    assert!(lines[1].starts_with("match 502 running"), "{lines:?}");
    assert!(admin.counter("datagrams") > 100);
    assert!(admin.counter("drop_malformed_hello") > 0, "junk counted");
    assert_eq!(admin.counter("connections_live"), 4);
    assert_eq!(admin.counter("matches_running"), 2);

    // A second admin connection ends match 501 only.
    let mut second = Admin::connect(&path);
    assert_eq!(second.command("end 501").1, "ok match 501 ending");
    assert_eq!(second.command("quit").1, "ok bye");
    let ended_at = Instant::now();
    while ended_at.elapsed() < Duration::from_secs(5) {
        step(&mut players, now_us());
        if over(&players[0]).is_some() && over(&players[1]).is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let turns_502 = players[2].turns.len();
    for _ in 0..100 {
        step(&mut players, now_us());
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(over(&players[0]), Some(MatchOverReason::Ended));
    assert_eq!(over(&players[1]), Some(MatchOverReason::Ended));
    assert_eq!(over(&players[2]), None, "the other match plays on");
    assert!(players[2].turns.len() > turns_502, "and keeps running");
    let (lines, _) = admin.command("list");
    assert!(lines[0].starts_with("match 501 over"), "{lines:?}");
    assert!(lines[1].starts_with("match 502 running"), "{lines:?}");
    assert_eq!(admin.counter("matches_over"), 1);

    // Match 502 is still going: the drain (0 s here) ends it, exit 3.
    let (code, log) = relay.stop();
    assert_eq!(code, Some(3), "{log}");
    assert!(log.contains("match 501 created (admin socket)"), "{log}");
    assert!(log.contains("match 501 ended by the admin socket"), "{log}");
    assert!(
        log.contains("no --state: a restart of this relay loses every match"),
        "said at start: {log}"
    );
    assert!(!path.exists(), "socket removed on exit");
}

#[test]
fn admin_flag_or_setup_file_is_required_and_a_live_socket_is_not_stolen() {
    let out = std::process::Command::new(relay_process::BIN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("RUNGS_RELAY_SECRET", SECRET)
        .env_remove("RUNGS_RELAY_MATCHES")
        .env_remove("RUNGS_RELAY_ADMIN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--admin PATH"));

    // The environment variable works like the flag.
    let dir = std::env::temp_dir().join(format!("rungs-relay-admin-env-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("admin.sock");
    let mut child = std::process::Command::new(relay_process::BIN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("RUNGS_RELAY_SECRET", SECRET)
        .env("RUNGS_RELAY_ADMIN", &path)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut admin = Admin::connect(&path);
    assert_eq!(admin.command("list").1, "ok 0 matches");
    // A second relay refuses to take over a live admin socket.
    let out = std::process::Command::new(relay_process::BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--admin"])
        .arg(&path)
        .env("RUNGS_RELAY_SECRET", SECRET)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("another process is listening"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(admin.command("list").1, "ok 0 matches", "still served");
    // Non-UTF-8 gets an error line and the connection goes on; a line
    // longer than 4096 bytes gets one and the connection is closed.
    admin.writer.write_all(b"list \xff\xfe\n").unwrap();
    let mut line = String::new();
    admin.reader.read_line(&mut line).unwrap();
    assert_eq!(line, "error a command is UTF-8 text\n");
    assert_eq!(admin.command("list").1, "ok 0 matches");
    let mut long = Admin::connect(&path);
    long.writer.write_all(&[b'x'; 5000]).unwrap();
    let mut line = String::new();
    long.reader.read_line(&mut line).unwrap();
    assert_eq!(line, "error line longer than 4096 bytes; closing\n");
    line.clear();
    assert_eq!(long.reader.read_line(&mut line).unwrap(), 0, "closed");
    assert_eq!(admin.command("list").1, "ok 0 matches", "others unaffected");
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    assert!(child.wait().unwrap().success());
    assert!(!path.exists(), "socket removed on exit");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn idle_admin_connections_are_closed_and_cannot_lock_the_lobby_out() {
    let relay = RelayProcess::serve_with(
        "relay-admin-idle",
        SECRET,
        None,
        &["--admin", "{dir}/admin.sock", "--admin-idle-seconds", "1"],
    );
    let path = relay.dir.join("admin.sock");
    // Sixteen connections that never say anything take every place.
    let mut idle: Vec<Admin> = (0..16).map(|_| Admin::connect(&path)).collect();
    let mut refused = Admin::connect(&path);
    let mut line = String::new();
    refused.reader.read_line(&mut line).unwrap();
    assert_eq!(line, "error too many admin connections\n");
    // One that trickles a byte at a time without ending a line gains
    // nothing by it either.
    let trickle_started = Instant::now();
    std::thread::sleep(Duration::from_millis(100));
    let mut closed = 0;
    for (i, a) in idle.iter_mut().enumerate() {
        if i == 0 {
            while trickle_started.elapsed() < Duration::from_millis(1500) {
                if a.writer.write_all(b"l").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        let mut line = String::new();
        a.reader.read_line(&mut line).unwrap();
        assert_eq!(
            line, "error no command for 1 s; closing\n",
            "connection {i}"
        );
        line.clear();
        assert_eq!(a.reader.read_line(&mut line).unwrap(), 0, "closed");
        closed += 1;
    }
    assert_eq!(closed, 16);
    assert!(trickle_started.elapsed() < Duration::from_secs(4));
    // The lobby gets in again, and a connection that sends commands stays.
    std::thread::sleep(Duration::from_millis(100));
    let mut lobby = Admin::connect(&path);
    for _ in 0..4 {
        assert_eq!(lobby.command("list").1, "ok 0 matches");
        std::thread::sleep(Duration::from_millis(600));
    }
    let (code, log) = relay.stop();
    assert_eq!(code, Some(0), "no match: {log}");
}

#[test]
fn matches_created_through_the_admin_socket_survive_a_restart_and_ended_ones_stay_ended() {
    // Match 601 from the setup file, 602 through the admin socket; 601 is
    // ended, then the relay is killed and started again with the same flags
    // and the same setup file.
    let setup = "match 601 seats 2 humans 0,1\n";
    let flags = ["--state", "{dir}/state", "--admin", "{dir}/admin.sock"];
    let mut first = RelayProcess::serve_with("relay-admin-restart", SECRET, Some(setup), &flags);
    let path = first.dir.join("admin.sock");
    let mut admin = Admin::connect(&path);
    assert_eq!(
        admin.command("create 602 seats 2 humans 0,1").1,
        "ok match 602 created"
    );
    assert_eq!(admin.command("end 601").1, "ok match 601 ending");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !admin.command("list").0[0].starts_with("match 601 over") {
        assert!(Instant::now() < deadline, "match 601 never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(admin);
    first.kill9();
    let listen = first.address.to_string();
    let mut flags_again = flags.to_vec();
    flags_again.extend(["--listen", &listen]);
    let second = RelayProcess::serve_with("relay-admin-restart", SECRET, Some(setup), &flags_again);
    let mut admin = Admin::connect(&path);
    let (lines, _) = admin.command("list");
    // Before the fix: 601 began again from the setup file and 602 was gone.
    assert!(
        lines.iter().any(|l| l.starts_with("match 602 loading")),
        "{lines:?}"
    );
    assert!(
        !lines.iter().any(|l| l.starts_with("match 601 loading")),
        "an ended match is not played again: {lines:?}"
    );

    // A player of 602 is welcomed; one of 601 hears that it is over.
    let start = Instant::now();
    let now_us = || start.elapsed().as_micros() as u64;
    let mut players = [
        player(602, 0, second.address, now_us()),
        player(601, 0, second.address, now_us()),
    ];
    let welcomed = |p: &Player| {
        p.events
            .iter()
            .any(|e| matches!(e, ClientEvent::Welcomed { .. }))
    };
    while start.elapsed() < Duration::from_secs(5)
        && (!welcomed(&players[0]) || players[1].events.is_empty())
    {
        step(&mut players, now_us());
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(welcomed(&players[0]), "{:?}", players[0].events);
    assert!(
        players[1].events.iter().any(|e| matches!(
            e,
            ClientEvent::Rejected(RejectReason::MatchOver) | ClientEvent::MatchOver { .. }
        )),
        "{:?}",
        players[1].events
    );
    // Match 602 is still going: the drain (0 s here) ends it, exit 3.
    let (code, log) = second.stop();
    assert_eq!(code, Some(3), "{log}");
    assert!(log.contains("match 602 resumed from its journal"), "{log}");
    assert!(!log.contains("match 601 created"), "{log}");
}
