//! The attack run itself (Linux). See `main.rs`.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::ExitCode;
use std::time::Instant;

use rungs_core::link::{Link, LinkIdentity};
use rungs_core::relay::ticket::{issue, Credentials, LobbySecret, TicketFields};
use rungs_core::relay::{
    relay_link_config, ClientConfig, ClientEvent, RelayClient, SeatTurn, RELAY_LINK_SEAT,
};
use rungs_core::rng::SplitMix64;
use rungs_core::wire::relay::{
    read_cookie, read_server_message, write_hello, ClientMessage, Hello, ServerMessage,
    COOKIE_BYTES, MAGIC, NO_COOKIE,
};
use rungs_core::wire::{packet, SessionKey};

use super::relay_under_test::{cpu_seconds, number, rss_kib, LaunchFlags, RelayUnderTest};

const SECRET_HEX: &str = "61747461636b2d6c6f6262792d6b6579";
const HONEST_MATCH: u64 = 1;
const VICTIM_MATCH: u64 = 2;
/// Seats of the honest match: 0–3 honest players, 4 the attacker.
const HONEST_SEATS: u8 = 4;
const ATTACKER_SEAT: u8 = 4;
/// Times the victim's seat connects before the attacks (each Hello captured).
const VICTIM_CONNECTIONS: u64 = 10;
/// Addresses that answer cookies in the storm's churn.
const CHURN_SOURCES: usize = 16;

const HELP: &str = "\
rungs-relay-attack: attack a real rungs-relay over loopback during an honest
match and measure what the attacks did

FLAGS (default)
  --seconds N        seconds per phase (20)
  --short            2 s per phase, 64 sources, 5,000 datagrams/s (the
                     form tests/relay_attack_udp.rs runs)
  --rate N           attack datagrams per second (20000)
  --sources N        source addresses of the floods and the storm (512)
  --relay PATH       the rungs-relay binary (next to this one)
  --relay-cpu N      core to pin the relay to (0)
  --load-cpu N       core to pin this process to (1)
  --no-pin           pin nothing
  --realtime         run the relay SCHED_FIFO and this process SCHED_FIFO
                     below it (needs root)
  --relay-log PATH   keep the relay's log there
";

struct Options {
    seconds: f64,
    rate: u64,
    sources: usize,
    launch: LaunchFlags,
}

fn parse_options() -> Result<Options, String> {
    let mut o = Options {
        seconds: 20.0,
        rate: 20_000,
        sources: 512,
        launch: LaunchFlags::new()?,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if o.launch.take(&flag, &mut args)? {
            continue;
        }
        match flag.as_str() {
            "--seconds" => o.seconds = number("--seconds", args.next())?.max(1) as f64,
            "--short" => {
                o.seconds = 2.0;
                o.sources = 64;
                o.rate = 5_000;
            }
            "--rate" => o.rate = number("--rate", args.next())?.max(1),
            "--sources" => o.sources = number("--sources", args.next())?.clamp(1, 60_000) as usize,
            _ => return Err(format!("unknown flag `{flag}`")),
        }
    }
    Ok(o)
}

fn socket_at(ip: Ipv4Addr) -> Result<UdpSocket, String> {
    let s = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )
    .map_err(|e| e.to_string())?;
    let _ = s.set_recv_buffer_size(1 << 20);
    let _ = s.set_send_buffer_size(1 << 20);
    s.bind(&SocketAddr::from((ip, 0)).into())
        .map_err(|e| format!("binding {ip}: {e}"))?;
    s.set_nonblocking(true).map_err(|e| e.to_string())?;
    Ok(s.into())
}

/// An honest player: a `RelayClient` on its own socket, what it executed
/// and what it submitted.
struct Honest {
    seat: u8,
    socket: UdpSocket,
    client: RelayClient,
    /// (tick, seat, order) of every order executed.
    executed: Vec<(u32, u8, Vec<u8>)>,
    submitted: Vec<Vec<u8>>,
    next_order: u32,
    /// Submit → executed here, µs, of this phase's orders.
    latency_us: Vec<u64>,
    reconnects: u64,
    /// Its latest transport packets and every Hello it sent (captured).
    captured_packets: Vec<Vec<u8>>,
    captured_hellos: Vec<Vec<u8>>,
}

impl Honest {
    fn step(&mut self, now: u64, submit: bool, rng: &mut SplitMix64, buf: &mut [u8]) {
        while let Ok((len, from)) = self.socket.recv_from(buf) {
            self.client.handle_datagram(now, from, &buf[..len]);
        }
        self.client.handle_timeout(now);
        while let Some(e) = self.client.poll_event() {
            if e == ClientEvent::ConnectionLost {
                self.reconnects += 1;
            }
        }
        while let Some(turn) = self.client.next_turn() {
            for (seat, s) in turn.seats.iter().enumerate() {
                if let SeatTurn::Order(o) = s {
                    self.executed.push((turn.tick, seat as u8, o.clone()));
                    if seat == usize::from(self.seat) && o.len() == 13 {
                        let sent = u64::from_le_bytes(o[5..13].try_into().unwrap_or([0; 8]));
                        self.latency_us.push(now.saturating_sub(sent));
                    }
                }
            }
            // 120 APM: an order every 15 ticks on average.
            if submit && self.client.is_connected() && rng.chance_ppm(1_000_000 / 15) {
                let mut order = vec![self.seat];
                order.extend_from_slice(&self.next_order.to_le_bytes());
                order.extend_from_slice(&now.to_le_bytes());
                if self.client.submit_order(&order).is_ok() {
                    self.next_order += 1;
                    self.submitted.push(order);
                }
            }
        }
        while let Some((to, len)) = self.client.poll_transmit(now, buf) {
            let datagram = &buf[..len];
            match datagram[0] {
                MAGIC => self.captured_hellos.push(datagram.to_vec()),
                _ => {
                    if self.captured_packets.len() >= 4096 {
                        self.captured_packets.drain(..2048);
                    }
                    self.captured_packets.push(datagram.to_vec());
                }
            }
            let _ = self.socket.send_to(datagram, to);
        }
    }
}

/// A ticket holder speaking the protocol by hand: the Hello, the cookie,
/// then a bare link it can put anything into.
struct Raw {
    socket: UdpSocket,
    credentials: Credentials,
    seat: u8,
    nonce: u64,
    cookie: [u8; COOKIE_BYTES],
    link: Link,
    key: SessionKey,
    last_hello_us: Option<u64>,
    welcomed: bool,
}

impl Raw {
    fn new(socket: UdpSocket, credentials: Credentials, nonce: u64, now: u64) -> Raw {
        let seat = credentials.ticket[1];
        let key = SessionKey(credentials.link_secret.connection_key(nonce));
        let link = Link::new(
            relay_link_config(),
            LinkIdentity {
                session_id: nonce as u32,
                key,
                local_seat: seat,
                peer_seat: RELAY_LINK_SEAT,
            },
            now,
        )
        .expect("relay link settings are valid");
        Raw {
            socket,
            credentials,
            seat,
            nonce,
            cookie: NO_COOKIE,
            link,
            key,
            last_hello_us: None,
            welcomed: false,
        }
    }

    fn hello(&self, buf: &mut [u8]) -> usize {
        let hello = Hello {
            nonce: self.nonce,
            have_horizon: 0,
            ticket: self.credentials.ticket,
            cookie: self.cookie,
        };
        write_hello(&hello, &self.credentials.link_secret.0, buf).unwrap_or(0)
    }

    fn step(&mut self, now: u64, relay: SocketAddr, buf: &mut [u8]) {
        while let Ok((len, _)) = self.socket.recv_from(buf) {
            let d = &buf[..len];
            if d[0] == MAGIC {
                if let Ok(c) = read_cookie(d) {
                    if c.nonce == self.nonce {
                        self.cookie = c.cookie;
                        self.last_hello_us = None;
                    }
                }
            } else if packet::verify_tag(d, &self.key, self.seat) {
                if let Ok(p) = packet::decode(d) {
                    let _ = self.link.handle_packet(now, &p, len);
                }
            }
        }
        while let Some(message) = self.link.recv() {
            if let Ok(ServerMessage::Welcome(_)) = read_server_message(&message) {
                self.welcomed = true;
            }
        }
        if !self.welcomed && self.last_hello_us.map_or(true, |t| now >= t + 250_000) {
            let len = self.hello(buf);
            let _ = self.socket.send_to(&buf[..len], relay);
            self.last_hello_us = Some(now);
        }
        self.link.handle_timeout(now);
        while let Some(len) = self.link.poll_transmit(now, buf) {
            let _ = self.socket.send_to(&buf[..len], relay);
        }
    }
}

/// A link of the attacker's that names seat `claimed` and connection id
/// `session_id`, signed with the attacker's own key.
fn forger(attacker: &Raw, claimed: u8, session_id: u32, now: u64) -> Link {
    Link::new(
        relay_link_config(),
        LinkIdentity {
            session_id,
            key: attacker.key,
            local_seat: claimed,
            peer_seat: RELAY_LINK_SEAT,
        },
        now,
    )
    .expect("relay link settings are valid")
}

/// The attack sources: sockets on their own loopback addresses that never
/// answer a cookie (what the relay sends them went to an address nobody
/// verified), and what went each way.
struct Sources {
    sockets: Vec<UdpSocket>,
    fds: Vec<libc::pollfd>,
    sent: u64,
    sent_bytes: u64,
    received_bytes: u64,
    /// Transport packets they received (a Welcome or bundles: a seat taken).
    received_packets: u64,
}

impl Sources {
    fn new(count: usize, second_octet: u8) -> Result<Sources, String> {
        let sockets: Vec<UdpSocket> = (0..count)
            .map(|i| {
                socket_at(Ipv4Addr::new(
                    127,
                    second_octet,
                    (i / 250) as u8,
                    1 + (i % 250) as u8,
                ))
            })
            .collect::<Result<_, _>>()?;
        let fds = sockets
            .iter()
            .map(|s| libc::pollfd {
                fd: s.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        Ok(Sources {
            sockets,
            fds,
            sent: 0,
            sent_bytes: 0,
            received_bytes: 0,
            received_packets: 0,
        })
    }

    fn send(&mut self, i: usize, bytes: &[u8], to: SocketAddr) {
        let s = &self.sockets[i % self.sockets.len()];
        if s.send_to(bytes, to).is_ok() {
            self.sent += 1;
            self.sent_bytes += bytes.len() as u64;
        }
    }

    /// Read what arrived (every answer counts, whatever it is).
    fn drain(&mut self, buf: &mut [u8]) {
        // SAFETY: fds is a live array of pollfd of the length given.
        let ready = unsafe { libc::poll(self.fds.as_mut_ptr(), self.fds.len() as libc::nfds_t, 0) };
        if ready <= 0 {
            return;
        }
        for (fd, s) in self.fds.iter_mut().zip(&self.sockets) {
            if fd.revents == 0 {
                continue;
            }
            fd.revents = 0;
            while let Ok((len, _)) = s.recv_from(buf) {
                self.received_bytes += len as u64;
                if buf[0] == packet::MAGIC {
                    self.received_packets += 1;
                }
            }
        }
    }

    fn reset(&mut self) {
        self.sent = 0;
        self.sent_bytes = 0;
        self.received_bytes = 0;
        self.received_packets = 0;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Baseline,
    Garbage,
    ReplayedPackets,
    ReplayedHellos,
    ForgedTickets,
    SeatClaims,
    OversizedOrders,
    HelloStorm,
    After,
}

impl Phase {
    /// In this order: the replayed Hellos come right after the victim's
    /// connections, while the latest of their cookies are still fresh.
    const ALL: [Phase; 9] = [
        Phase::Baseline,
        Phase::ReplayedHellos,
        Phase::Garbage,
        Phase::ReplayedPackets,
        Phase::ForgedTickets,
        Phase::SeatClaims,
        Phase::OversizedOrders,
        Phase::HelloStorm,
        Phase::After,
    ];

    fn name(self) -> &'static str {
        match self {
            Phase::Baseline => "baseline (no attack)",
            Phase::Garbage => "garbage flood",
            Phase::ReplayedPackets => "replayed packets",
            Phase::ReplayedHellos => "replayed Hellos",
            Phase::ForgedTickets => "forged/expired/cross-match tickets",
            Phase::SeatClaims => "orders claiming another seat",
            Phase::OversizedOrders => "oversized orders",
            Phase::HelloStorm => "Hello storm, many addresses",
            Phase::After => "after (no attack)",
        }
    }
}

/// What one phase measured.
struct Row {
    phase: Phase,
    sent: u64,
    sent_bytes: u64,
    received_bytes: u64,
    relay_unverified: (u64, u64),
    opened: u64,
    cookies: u64,
    /// Rejects sent, and how many of them for replays.
    rejects: (u64, u64),
    limited: (u64, u64),
    drops: u64,
    order_ms: (f64, f64),
    orders: usize,
    reconnects: u64,
    relay_cpu: f64,
    rss_kib: u64,
    received_packets: u64,
}

fn percentile(sorted: &[u64], permille: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[(sorted.len() - 1) * permille / 1000]
}

/// Everything the run holds: the relay, the players, the attackers.
struct Run {
    relay: RelayUnderTest,
    address: SocketAddr,
    secret: LobbySecret,
    honest: Vec<Honest>,
    victim: Honest,
    attacker: Raw,
    sources: Sources,
    churn: Vec<Raw>,
    start: Instant,
    rng: SplitMix64,
    buf: Vec<u8>,
    victim_hellos: Vec<Vec<u8>>,
    replayed_hellos: u64,
}

fn credentials(secret: &LobbySecret, match_id: u64, seat: u8, expires: u64) -> Credentials {
    issue(
        secret,
        &TicketFields {
            match_id,
            seat,
            expires_unix_s: expires,
            nonce: match_id << 8 | u64::from(seat),
        },
    )
    .expect("seat in range")
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Run {
    fn now(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    /// One turn of everyone's loop: honest players, the victim, the
    /// attacker's own connection; then wait up to 1 ms.
    fn step(&mut self, submit: bool) {
        let now = self.now();
        for h in &mut self.honest {
            h.step(now, submit, &mut self.rng, &mut self.buf);
        }
        self.victim.step(now, false, &mut self.rng, &mut self.buf);
        self.attacker.step(now, self.address, &mut self.buf);
        self.sources.drain(&mut self.buf);
        // SAFETY: a sleep-free 1 ms wait on nothing: poll with no fds.
        unsafe { libc::poll(std::ptr::null_mut(), 0, 1) };
    }

    fn run_for(&mut self, seconds: f64, submit: bool) {
        let until = self.now() + (seconds * 1e6) as u64;
        while self.now() < until {
            self.step(submit);
        }
    }

    /// The victim's seat connects ten times (a process restarting), within
    /// the per-ticket allowance; every Hello it and the players sent is
    /// captured.
    fn victim_connects(&mut self, secret: &LobbySecret) -> Result<(), String> {
        for generation in 1..VICTIM_CONNECTIONS {
            // The same address each time (its cookies fit it): what a
            // spoofer replays "from the victim" then carries valid cookies.
            let now = self.now();
            let socket = self.victim.socket.try_clone().map_err(|e| e.to_string())?;
            let seed = 1000 + generation;
            let next = honest_player(secret, (VICTIM_MATCH, 0), seed, self.address, socket, now)?;
            let old = std::mem::replace(&mut self.victim, next);
            self.victim_hellos.extend(old.captured_hellos);
            let until = now + 6_000_000;
            while !self.victim.client.is_connected() && self.now() < until {
                self.step(false);
            }
            if !self.victim.client.is_connected() {
                return Err(format!(
                    "the victim's connection {generation} was not welcomed"
                ));
            }
        }
        self.run_for(0.2, false);
        self.victim_hellos
            .extend(self.victim.captured_hellos.iter().cloned());
        for h in &self.honest {
            self.victim_hellos.extend(h.captured_hellos.iter().cloned());
        }
        Ok(())
    }

    /// Send `count` datagrams of `phase`'s attack.
    fn attack(&mut self, phase: Phase, count: u64, now: u64) {
        let relay = self.address;
        for _ in 0..count {
            let source =
                self.rng
                    .below_or_equal(self.sources.sockets.len() as u64 - 1) as usize;
            match phase {
                Phase::Baseline | Phase::After => return,
                Phase::Garbage => {
                    let len = 1 + self.rng.below_or_equal(1399) as usize;
                    let mut d: Vec<u8> = (0..len).map(|_| self.rng.next_u64() as u8).collect();
                    match self.rng.below_or_equal(3) {
                        0 => d[0] = MAGIC,
                        1 | 2 if len >= 8 => {
                            d[0] = packet::MAGIC;
                            // A live connection id now and then.
                            let h = &self.honest[source % self.honest.len()];
                            let id = h.client.link().identity().session_id;
                            d[4..8].copy_from_slice(&id.to_le_bytes());
                        }
                        _ => {}
                    }
                    self.sources.send(source, &d, relay);
                }
                Phase::ReplayedPackets => {
                    let h = &self.honest
                        [self.rng.below_or_equal(self.honest.len() as u64 - 1) as usize];
                    if h.captured_packets.is_empty() {
                        continue;
                    }
                    let k = self.rng.below_or_equal(h.captured_packets.len() as u64 - 1) as usize;
                    let d = h.captured_packets[k].clone();
                    self.sources.send(source, &d, relay);
                }
                Phase::ReplayedHellos => {
                    let k = self.rng.below_or_equal(self.victim_hellos.len() as u64 - 1) as usize;
                    let d = self.victim_hellos[k].clone();
                    self.replayed_hellos += 1;
                    if self.rng.chance_ppm(100_000) {
                        // As if from the victim's own address (a spoofer):
                        // whatever the relay answers goes to the victim.
                        let _ = self.victim.socket.send_to(&d, relay);
                    } else {
                        self.sources.send(source, &d, relay);
                    }
                }
                Phase::ForgedTickets => {
                    let d = self.forged_hello();
                    self.sources.send(source, &d, relay);
                }
                Phase::SeatClaims => {
                    let seat = self.rng.below_or_equal(u64::from(HONEST_SEATS) - 1) as u8;
                    let own_id = self.attacker.nonce as u32;
                    let their_id = self.honest[usize::from(seat)]
                        .client
                        .link()
                        .identity()
                        .session_id;
                    let id = if self.rng.chance_ppm(500_000) {
                        own_id
                    } else {
                        their_id
                    };
                    let mut link = forger(&self.attacker, seat, id, now);
                    let order = ClientMessage::OrderSubmit {
                        sequence: 1 + self.rng.below_or_equal(1000) as u32,
                        payload: b"not my seat",
                    }
                    .to_vec();
                    let _ = link.send(&order);
                    if let Some(len) = link.poll_transmit(now, &mut self.buf) {
                        let d = self.buf[..len].to_vec();
                        let _ = self.attacker.socket.send_to(&d, relay);
                        self.sources.sent += 1;
                        self.sources.sent_bytes += len as u64;
                    }
                }
                Phase::OversizedOrders => {
                    match self.rng.below_or_equal(3) {
                        0 | 1 => {
                            // Over the protocol's 512 bytes, or a length
                            // that does not match the bytes.
                            let len = 513 + self.rng.below_or_equal(480) as usize;
                            let declared = if self.rng.chance_ppm(500_000) {
                                len
                            } else {
                                10
                            };
                            let mut m = vec![0x11];
                            m.extend_from_slice(
                                &(1 + self.rng.below_or_equal(99) as u32).to_le_bytes(),
                            );
                            m.extend_from_slice(&(declared as u16).to_le_bytes());
                            m.resize(7 + len, 0xAA);
                            if self.attacker.link.send(&m).is_ok() {
                                self.sources.sent += 1;
                                self.sources.sent_bytes += m.len() as u64;
                            }
                        }
                        _ => {
                            let len = if self.rng.chance_ppm(500_000) {
                                1400
                            } else {
                                9000
                            };
                            let mut d = vec![0u8; len];
                            d[0] = packet::MAGIC;
                            d[4..8].copy_from_slice(&(self.attacker.nonce as u32).to_le_bytes());
                            d[3] = ATTACKER_SEAT;
                            let _ = self.attacker.socket.send_to(&d, relay);
                            self.sources.sent += 1;
                            self.sources.sent_bytes += len as u64;
                        }
                    }
                }
                Phase::HelloStorm => {
                    let creds = self.attacker.credentials;
                    let hello = Hello {
                        nonce: self.rng.next_u64() | 1,
                        have_horizon: 0,
                        ticket: creds.ticket,
                        cookie: NO_COOKIE,
                    };
                    let len = write_hello(&hello, &creds.link_secret.0, &mut self.buf).unwrap_or(0);
                    let d = self.buf[..len].to_vec();
                    self.sources.send(source, &d, relay);
                }
            }
        }
    }

    /// A Hello no lobby issued for this relay: forged (MAC), expired, for
    /// a match the relay does not hold, or another match's ticket edited to
    /// name this one; some with a made-up cookie.
    fn forged_hello(&mut self) -> Vec<u8> {
        let unix = unix_now();
        let (creds, edit) = match self.rng.below_or_equal(3) {
            0 => {
                let mut c = credentials(&self.secret, HONEST_MATCH, 0, unix + 3600);
                c.ticket[26 + self.rng.below_or_equal(15) as usize] ^= 1;
                (c, false)
            }
            1 => (credentials(&self.secret, HONEST_MATCH, 1, unix - 1), false),
            2 => (credentials(&self.secret, 999, 0, unix + 3600), false),
            _ => (
                credentials(&self.secret, VICTIM_MATCH, 1, unix + 3600),
                true,
            ),
        };
        let mut ticket = creds.ticket;
        if edit {
            // Cross-match: the victim match's genuine ticket, edited to
            // name the honest match (the MAC no longer fits).
            ticket[2..10].copy_from_slice(&HONEST_MATCH.to_le_bytes());
        }
        let cookie = if self.rng.chance_ppm(300_000) {
            [self.rng.next_u64() as u8 | 1; COOKIE_BYTES]
        } else {
            NO_COOKIE
        };
        let hello = Hello {
            nonce: self.rng.next_u64() | 1,
            have_horizon: 0,
            ticket,
            cookie,
        };
        let len = write_hello(&hello, &creds.link_secret.0, &mut self.buf).unwrap_or(0);
        self.buf[..len].to_vec()
    }

    /// The storm's churn: addresses the attacker really holds, each saying
    /// Hello with a fresh nonce for its own seat and answering the cookie.
    fn churn(&mut self, now: u64) {
        for i in 0..self.churn.len() {
            let c = &mut self.churn[i];
            if c.welcomed {
                // Connected: start over with a fresh nonce.
                let creds = c.credentials;
                let socket = c.socket.try_clone().expect("clone a socket");
                let nonce = self.rng.next_u64() | 1;
                self.churn[i] = Raw::new(socket, creds, nonce, now);
            }
            self.churn[i].step(now, self.address, &mut self.buf);
        }
    }

    fn phase(&mut self, phase: Phase, seconds: f64, rate: u64) -> Result<Row, String> {
        for h in self.honest.iter_mut() {
            h.latency_us.clear();
        }
        let reconnects: u64 = self.honest.iter().map(|h| h.reconnects).sum();
        self.sources.reset();
        let pid = self.relay.child.id();
        let before = self.relay.admin_fields("counters")?;
        let cpu0 = cpu_seconds(pid).ok_or("relay CPU time unreadable")?;
        let t0 = Instant::now();
        let started = self.now();
        let end = started + (seconds * 1e6) as u64;
        let mut sent = 0u64;
        while self.now() < end {
            let now = self.now();
            let due = (now - started) * rate / 1_000_000;
            // At most 2 ms of the rate at once, so a late loop does not burst.
            let batch = due.saturating_sub(sent).min(rate / 500 + 1);
            self.attack(phase, batch, now);
            sent += batch;
            if phase == Phase::HelloStorm {
                self.churn(now);
            }
            self.step(true);
        }
        let elapsed = t0.elapsed().as_secs_f64();
        let cpu = cpu_seconds(pid).ok_or("relay CPU time unreadable")? - cpu0;
        // What is still in flight to the sources arrives within a moment.
        for _ in 0..50 {
            self.step(true);
        }
        let after = self.relay.admin_fields("counters")?;
        let delta = |name: &str| {
            after.get(name).copied().unwrap_or(0) - before.get(name).copied().unwrap_or(0)
        };
        let mut latency: Vec<u64> = self
            .honest
            .iter()
            .flat_map(|h| h.latency_us.iter().copied())
            .collect();
        latency.sort_unstable();
        Ok(Row {
            phase,
            sent: self.sources.sent,
            sent_bytes: self.sources.sent_bytes,
            received_bytes: self.sources.received_bytes,
            relay_unverified: (delta("unverified_bytes_in"), delta("unverified_bytes_out")),
            opened: delta("connections_opened"),
            cookies: delta("cookies_sent"),
            rejects: (
                after
                    .iter()
                    .filter(|(k, _)| k.starts_with("rejected_"))
                    .map(|(k, v)| v - before.get(k).copied().unwrap_or(0))
                    .sum(),
                delta("rejected_replayed"),
            ),
            limited: (
                delta("drop_hello_address_rate"),
                delta("drop_hello_ticket_rate"),
            ),
            drops: delta("drop_link")
                + delta("drop_unknown_connection")
                + delta("drop_not_relay")
                + delta("drop_malformed_hello")
                + delta("drop_bad_message")
                + delta("drop_move_not_newest"),
            order_ms: (
                percentile(&latency, 500) as f64 / 1000.0,
                percentile(&latency, 990) as f64 / 1000.0,
            ),
            orders: latency.len(),
            reconnects: self.honest.iter().map(|h| h.reconnects).sum::<u64>() - reconnects,
            relay_cpu: cpu / elapsed,
            rss_kib: rss_kib(pid).unwrap_or(0),
            received_packets: self.sources.received_packets,
        })
    }
}

fn honest_player(
    secret: &LobbySecret,
    (match_id, seat): (u64, u8),
    seed: u64,
    relay: SocketAddr,
    socket: UdpSocket,
    now: u64,
) -> Result<Honest, String> {
    let creds = credentials(secret, match_id, seat, unix_now() + 3600);
    let client =
        RelayClient::new(ClientConfig::new(creds, relay, seed), now).map_err(|e| e.to_string())?;
    Ok(Honest {
        seat,
        socket,
        client,
        executed: Vec::new(),
        submitted: Vec::new(),
        next_order: 0,
        latency_us: Vec::new(),
        reconnects: 0,
        captured_packets: Vec::new(),
        captured_hellos: Vec::new(),
    })
}

/// Check what the honest players executed: every honest order exactly
/// once for each of them, nothing under an honest seat its player did not
/// submit. (lost, doubled, foreign) counts.
fn check_orders(honest: &[Honest]) -> (usize, usize, usize, usize) {
    let mut submitted: HashMap<&[u8], u8> = HashMap::new();
    for h in honest {
        for o in &h.submitted {
            submitted.insert(o, h.seat);
        }
    }
    let (mut lost, mut doubled, mut foreign) = (0, 0, 0);
    for h in honest {
        let mut seen: HashMap<&[u8], usize> = HashMap::new();
        for (_, seat, o) in &h.executed {
            if *seat < HONEST_SEATS {
                match submitted.get(o.as_slice()) {
                    Some(s) if s == seat => *seen.entry(o).or_default() += 1,
                    _ => foreign += 1,
                }
            }
        }
        lost += submitted.keys().filter(|o| !seen.contains_key(*o)).count();
        doubled += seen.values().filter(|&&n| n > 1).count();
    }
    (submitted.len(), lost, doubled, foreign)
}

pub fn main() -> ExitCode {
    let o = match parse_options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("rungs-relay-attack: {e}");
            print!("{HELP}");
            return ExitCode::from(2);
        }
    };
    match run(&o) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            println!("the attack run did not work: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(o: &Options) -> Result<bool, String> {
    o.launch.apply_to_self();
    let secret = LobbySecret::from_hex(SECRET_HEX).map_err(|e| e.to_string())?;
    let mut relay = RelayUnderTest::start(&o.launch.launch(SECRET_HEX), 256, &[], "relay-attack")?;
    relay.admin(&format!(
        "create {HONEST_MATCH} seats 5 humans 0,1,2,3,4 checksum_interval 30 timing_policy off"
    ))?;
    relay.admin(&format!(
        "create {VICTIM_MATCH} seats 2 humans 0,1 timing_policy off load_wait_seconds 3600"
    ))?;
    let address = relay.address;
    let start = Instant::now();
    let localhost = || socket_at(Ipv4Addr::new(127, 0, 0, 1));
    let honest = (0..HONEST_SEATS)
        .map(|seat| {
            let seed = 100 + u64::from(seat);
            honest_player(
                &secret,
                (HONEST_MATCH, seat),
                seed,
                address,
                localhost()?,
                0,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let victim = honest_player(&secret, (VICTIM_MATCH, 0), 1000, address, localhost()?, 0)?;
    let attacker = Raw::new(
        socket_at(Ipv4Addr::new(127, 0, 0, 2))?,
        credentials(&secret, HONEST_MATCH, ATTACKER_SEAT, unix_now() + 3600),
        0xA77A_C4E5,
        0,
    );
    let churn = (0..CHURN_SOURCES)
        .map(|i| {
            let socket = socket_at(Ipv4Addr::new(127, 3, 0, 1 + i as u8))?;
            Ok(Raw::new(socket, attacker.credentials, 0xC0DE + i as u64, 0))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut run = Run {
        relay,
        address,
        secret,
        honest,
        victim,
        attacker,
        sources: Sources::new(o.sources, 1)?,
        churn,
        start,
        rng: SplitMix64::new(0xA77AC4),
        buf: vec![0u8; 65536],
        victim_hellos: Vec::new(),
        replayed_hellos: 0,
    };
    // Everyone joins; the honest match starts when all five said Hello.
    run.run_for(1.0, false);
    if !run.honest.iter().all(|h| h.client.is_connected()) || !run.attacker.welcomed {
        return Err("the honest match did not start".into());
    }
    let rss_before = rss_kib(run.relay.child.id()).unwrap_or(0);
    println!(
        "honest match: 4 players + the attacker's seat, 30 ticks/s; {} s per phase, {} attack datagrams/s, {} source addresses",
        o.seconds,
        o.rate,
        o.sources
    );
    println!(
        "relay RSS before the attacks: {:.1} MiB",
        rss_before as f64 / 1024.0
    );
    println!();
    println!("| phase | attack datagrams (bytes) | bytes back to unverified addresses | relay unverified in / out (bytes) | connections opened | cookies sent | Rejects sent (for replays) | Hellos dropped by address / ticket limit | datagrams dropped | honest order → executed p50 / p99 (ms, orders) | honest reconnects | relay CPU | relay RSS (MiB) |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for phase in Phase::ALL {
        if phase == Phase::ReplayedHellos {
            run.victim_connects(&secret)?;
            println!(
                "(the victim's seat connected {VICTIM_CONNECTIONS} times: {} Hellos captured, the players' own included)",
                run.victim_hellos.len()
            );
        }
        let row = run.phase(phase, o.seconds, o.rate)?;
        println!(
            "| {} | {} ({}) | {} | {} / {} | {} | {} | {} ({}) | {} / {} | {} | {:.1} / {:.1} ({}) | {} | {:.2} | {:.1} |",
            row.phase.name(),
            row.sent,
            row.sent_bytes,
            row.received_bytes,
            row.relay_unverified.0,
            row.relay_unverified.1,
            row.opened,
            row.cookies,
            row.rejects.0,
            row.rejects.1,
            row.limited.0,
            row.limited.1,
            row.drops,
            row.order_ms.0,
            row.order_ms.1,
            row.orders,
            row.reconnects,
            row.relay_cpu,
            row.rss_kib as f64 / 1024.0
        );
        rows.push(row);
    }
    // Let the last orders run, then judge.
    run.run_for(1.0, false);
    let (orders, lost, doubled, foreign) = check_orders(&run.honest);
    let rss_after = rss_kib(run.relay.child.id()).unwrap_or(0);
    let victim_lost = run.victim.reconnects;
    let mut ok = true;
    let mut verdict = |good: bool, text: String| {
        println!("{} {text}", if good { "ok  " } else { "FAIL" });
        ok &= good;
    };
    println!();
    let storm = rows.iter().find(|r| r.phase == Phase::HelloStorm);
    for r in &rows {
        if r.phase == Phase::Baseline || r.phase == Phase::After {
            continue;
        }
        verdict(
            r.received_bytes <= r.sent_bytes && r.relay_unverified.1 <= r.relay_unverified.0,
            format!(
                "{}: unverified addresses got {} bytes for {} sent (relay: {} out for {} in)",
                r.phase.name(),
                r.received_bytes,
                r.sent_bytes,
                r.relay_unverified.1,
                r.relay_unverified.0
            ),
        );
        verdict(
            r.received_packets == 0,
            format!(
                "{}: {} transport packets reached an attack address",
                r.phase.name(),
                r.received_packets
            ),
        );
        if r.phase != Phase::HelloStorm {
            verdict(
                r.opened == 0,
                format!("{}: {} connections opened", r.phase.name(), r.opened),
            );
        }
    }
    let replayed = rows
        .iter()
        .find(|r| r.phase == Phase::ReplayedHellos)
        .map_or(0, |r| r.opened);
    verdict(
        replayed == 0 && victim_lost == 0,
        format!(
            "replayed Hellos: {} sent, {replayed} accepted; the victim's connection lost {victim_lost} times",
            run.replayed_hellos
        ),
    );
    if let Some(storm) = storm {
        // The churn opens the attacker's own seat at most at the ticket's
        // rate: 8 at once, then one every 2 s.
        let allowed = 8 + (o.seconds / 2.0).ceil() as u64 + 1;
        verdict(
            storm.opened <= allowed,
            format!(
                "Hello storm: the attacker's seat opened {} connections from addresses it holds (allowed {allowed})",
                storm.opened
            ),
        );
    }
    verdict(
        lost == 0 && doubled == 0 && foreign == 0,
        format!(
            "honest orders: {orders} submitted, {lost} lost, {doubled} doubled, {foreign} under an honest seat not submitted by it (over 4 players' logs)"
        ),
    );
    let honest_reconnects: u64 = run.honest.iter().map(|h| h.reconnects).sum();
    verdict(
        honest_reconnects == 0,
        format!("honest players reconnected {honest_reconnects} times"),
    );
    let base = rows.first().map_or((0.0, 0.0), |r| r.order_ms);
    let after = rows.last().map_or((0.0, 0.0), |r| r.order_ms);
    println!(
        "honest order p99: {:.1} ms before, {:.1} ms after; relay RSS {:.1} MiB before, {:.1} MiB after",
        base.1,
        after.1,
        rss_before as f64 / 1024.0,
        rss_after as f64 / 1024.0
    );
    if let Ok(Some(status)) = run.relay.child.try_wait() {
        verdict(false, format!("the relay exited: {status}"));
    }
    run.relay.stop();
    Ok(ok)
}
