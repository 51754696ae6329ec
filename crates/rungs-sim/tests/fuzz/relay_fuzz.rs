//! Deterministic mutation fuzzing of the relay protocol's decoders (S10,
//! `src/wire/relay.rs`): no input may make them panic, and every input they
//! accept must be canonical — writing the decoded value back gives the same
//! bytes — so one meaning has one byte string. Then the relay's and the
//! client's whole receive paths, and the relay's Hello path (cookies,
//! replays, rate limits), on mutated genuine traffic.
//!
//! Like `transport_fuzz.rs`: a seeded SplitMix64 mutates a corpus of genuine
//! datagrams and messages (bit flips, byte overwrites, boundary values,
//! insertions, deletions, truncation, splices). Input counts:
//! `RUNGS_FUZZ_ITERATIONS` if set, otherwise 10,000,000 per target in release
//! builds and 2,000,000 in debug builds. Run
//! `cargo test --release --test relay_fuzz -- --nocapture` for the
//! execs/second figure.

use std::time::Instant;

use rungs_sim::SplitMix64;

use crate::common_fuzz;
use common_fuzz::{iterations, report, Format};
use rungs_core::wire::relay::*;

const SECRET: [u8; 16] = *b"fuzz-link-secret";

fn corpus() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; MAX_MESSAGE_BYTES];
    for cookie in [NO_COOKIE, [0x5C; COOKIE_BYTES]] {
        let len = write_hello(
            &Hello {
                nonce: 0xAABB_CCDD_0011_2233,
                have_horizon: 77,
                ticket: [3; TICKET_BYTES],
                cookie,
            },
            &SECRET,
            &mut buf,
        )
        .unwrap();
        out.push(buf[..len].to_vec());
    }
    let challenge = CookieChallenge {
        nonce: 0xAABB_CCDD_0011_2233,
        cookie: [0x5C; COOKIE_BYTES],
    };
    let len = write_cookie(&challenge, &mut buf).unwrap();
    out.push(buf[..len].to_vec());
    for reason in RejectReason::ALL {
        let len = write_reject(&Reject { reason, nonce: 5 }, &mut buf).unwrap();
        out.push(buf[..len].to_vec());
    }
    out.push(
        ServerMessage::Welcome(Welcome {
            seat: 1,
            seat_count: 8,
            human_mask: 0x0F,
            tick_rate_millihz: 30_000,
            bundle_interval: 2,
            ai_order_delay: 8,
            checksum_interval: 30,
            relay_tick: 90,
            resume_from_tick: 0,
            horizon_tick: 90,
            highest_accepted_sequence: 3,
            match_started: true,
            frequent_reports: true,
        })
        .to_vec(),
    );
    let mut states = [SeatPresence::Ai; MAX_SEATS];
    states[..5].copy_from_slice(&[
        SeatPresence::Connected,
        SeatPresence::Loading,
        SeatPresence::Reconnecting,
        SeatPresence::Left,
        SeatPresence::Ai,
    ]);
    out.push(
        ServerMessage::Presence {
            tick: 4,
            seat_count: 5,
            states,
        }
        .to_vec(),
    );
    for (from, to, orders) in [(0u32, 1u32, 0usize), (10, 12, 3), (5, 400, 9)] {
        let mut w = BundleWriter::new(&mut buf).unwrap();
        for i in 0..orders {
            let payload = vec![i as u8; 1 + i * 13];
            let kind = if i == 2 {
                EntryKind::Quit
            } else {
                EntryKind::Order
            };
            let payload: &[u8] = if kind == EntryKind::Order {
                &payload
            } else {
                &[]
            };
            assert!(w.push(&BundleEntry {
                tick: from + (i as u32 / 2),
                seat: (i % 2) as u8 + 2 * (i as u8 / 4),
                kind,
                payload,
            }));
        }
        let len = w.finish(from, to, orders == 3).unwrap();
        out.push(buf[..len].to_vec());
    }
    out.push(
        ServerMessage::Pong {
            t0_us: 1,
            t1_us: 2,
            t2_us: 3,
            relay_tick: 4,
            highest_accepted_sequence: 5,
        }
        .to_vec(),
    );
    out.push(
        ServerMessage::Desync {
            tick: 60,
            reported_mask: 7,
            disagreeing_mask: 4,
        }
        .to_vec(),
    );
    out.push(
        ServerMessage::MatchOver {
            final_tick: 9,
            reason: MatchOverReason::TickLimit,
        }
        .to_vec(),
    );
    out.push(
        ClientMessage::OrderSubmit {
            sequence: 4,
            payload: &[1, 2, 3, 4, 5],
        }
        .to_vec(),
    );
    out.push(
        ClientMessage::ChecksumReport {
            tick: 30,
            checksum: 99,
        }
        .to_vec(),
    );
    out.push(ClientMessage::Ping { t0_us: 123_456 }.to_vec());
    out.push(
        ClientMessage::Quit {
            sequence: 8,
            payload: b"",
        }
        .to_vec(),
    );
    out.push(
        ClientMessage::Quit {
            sequence: 9,
            payload: b"gg",
        }
        .to_vec(),
    );
    out.push(ClientMessage::EphemeralSubmit { payload: b"voice" }.to_vec());
    out.push(
        ServerMessage::OrderRefused {
            sequence: 10,
            reason: rungs_core::wire::relay::RefusalReason::QueueFull,
        }
        .to_vec(),
    );
    out.push(
        ServerMessage::Ephemeral {
            tick: 11,
            seat: 2,
            payload: &[7; 40],
        }
        .to_vec(),
    );
    out.push(ClientMessage::ResyncRequest { horizon: 12 }.to_vec());
    out.push(
        ServerMessage::Timing(TimingChange {
            from_tick: 640,
            anchor_tick: 600,
            anchor_ms: 20_000,
            tick_rate_millihz: 20_000,
            bundle_interval: 3,
            look_ahead: 9,
        })
        .to_vec(),
    );
    for worst_rtt_ms in [Some(80), None, Some(MAX_REPORTED_RTT_MS)] {
        out.push(
            ClientMessage::TimingReport(rungs_core::report::Report {
                process_us: 5_000,
                max_wait_ms: 120,
                worst_rtt_ms,
                detail: Some(rungs_core::report::ReportDetail {
                    frames: 16,
                    stalled_frames: 3,
                    stall_ms: 90,
                    needs: worst_rtt_ms.map(|_| rungs_core::report::LookAheadNeeds {
                        reference: 5,
                        most: 6,
                        above: [2, 4, 9, 16],
                    }),
                    ..rungs_core::report::ReportDetail::from_worst(worst_rtt_ms)
                }),
            })
            .to_vec(),
        );
    }
    out
}

/// What the relay messages find interesting (tests/common/fuzz.rs).
const RELAY: Format = Format {
    interesting: &[0x00, 0x01, 0x02, 0x7F, 0x80, 0xFE, 0xFF, 0xB8, 0x03, 0x11],
    max_len: 2 * MAX_MESSAGE_BYTES,
    field: length_field,
};

/// Lengths, counts and ticks are 16/32-bit fields.
fn length_field(rng: &mut SplitMix64, input: &mut [u8], at: usize) -> bool {
    if input.len() < 4 {
        return false;
    }
    let at = at.min(input.len() - 2);
    let value = [0u16, 1, 0x7FFF, 0xFFFF, 512, 513][rng.below_or_equal(5) as usize];
    input[at..at + 2].copy_from_slice(&value.to_le_bytes());
    true
}

fn mutate(rng: &mut SplitMix64, corpus: &[Vec<u8>], input: &mut Vec<u8>) {
    common_fuzz::mutate(rng, corpus, input, &RELAY);
}

#[test]
fn fuzz_relay_decoders_accept_only_canonical_input() {
    let corpus = corpus();
    let mut rng = SplitMix64::new(0x5E1A7);
    let count = iterations(2_000_000, 10_000_000);
    let started = Instant::now();
    // Inputs each decoder accepted: server, client, Hello, Reject, Cookie.
    let mut accepted_by = [0u64; 5];
    let mut input = Vec::with_capacity(2 * MAX_MESSAGE_BYTES + 64);
    let mut out = [0u8; 2 * MAX_MESSAGE_BYTES];
    for _ in 0..count {
        input.clear();
        input.extend_from_slice(&corpus[rng.below_or_equal(corpus.len() as u64 - 1) as usize]);
        mutate(&mut rng, &corpus, &mut input);

        if let Ok(m) = read_server_message(&input) {
            accepted_by[0] += 1;
            if let ServerMessage::TurnBundle(b) = m {
                let mut n = 0;
                for e in b.entries() {
                    assert!(e.tick >= b.from_tick && e.tick < b.horizon_tick);
                    assert!(e.payload.len() <= MAX_ORDER_BYTES);
                    n += 1;
                }
                assert_eq!(n, b.entry_count());
            }
            let len = m.write(&mut out).expect("a decoded message re-encodes");
            assert_eq!(&out[..len], &input[..], "server message not canonical");
        }
        if let Ok(m) = read_client_message(&input) {
            accepted_by[1] += 1;
            let len = m.write(&mut out).expect("a decoded message re-encodes");
            assert_eq!(&out[..len], &input[..], "client message not canonical");
        }
        if let Ok(h) = read_hello(&input) {
            accepted_by[2] += 1;
            let len = write_hello(&h, &SECRET, &mut out).unwrap();
            assert_eq!(&out[..len - 8], &input[..len - 8], "hello not canonical");
            // A mutated Hello verifies only when nothing the tag covers changed.
            assert_eq!(verify_hello_tag(&input, &SECRET), out[..len] == input[..]);
        }
        if let Ok(r) = read_reject(&input) {
            accepted_by[3] += 1;
            let len = write_reject(&r, &mut out).unwrap();
            assert_eq!(&out[..len], &input[..], "reject not canonical");
        }
        if let Ok(c) = read_cookie(&input) {
            accepted_by[4] += 1;
            assert_ne!(c.cookie, NO_COOKIE);
            let len = write_cookie(&c, &mut out).unwrap();
            assert_eq!(&out[..len], &input[..], "cookie not canonical");
        }
    }
    let accepted: u64 = accepted_by.iter().sum();
    report("relay decoders", count, Some(accepted), started);
    for (name, n) in [
        "server message",
        "client message",
        "Hello",
        "Reject",
        "Cookie",
    ]
    .iter()
    .zip(accepted_by)
    {
        eprintln!("  {name} decoder: {count} inputs, {n} accepted");
        assert!(n > count / 2000, "the {name} decoder accepted only {n}");
    }
}

/// Genuine datagrams of a relayed match in both directions, from a relay and
/// two clients run against each other for a few simulated seconds.
fn traffic() -> (
    Vec<Vec<u8>>,
    Vec<Vec<u8>>,
    Vec<rungs_core::relay::ticket::Credentials>,
) {
    use rungs_core::relay::ticket::{issue, LobbySecret, TicketFields};
    use rungs_core::relay::{ClientConfig, MatchSetup, Relay, RelayClient, RelayConfig};
    let secret = LobbySecret::new(*b"fuzz-lobby-key-1").unwrap();
    let mut relay = Relay::new(RelayConfig::new(secret)).unwrap();
    relay.add_match(MatchSetup::new(7, 3, 0b011), 0).unwrap();
    let creds: Vec<_> = (0..2u8)
        .map(|seat| {
            issue(
                &secret,
                &TicketFields {
                    match_id: 7,
                    seat,
                    expires_unix_s: u64::MAX,
                    nonce: u64::from(seat),
                },
            )
            .unwrap()
        })
        .collect();
    let relay_addr: std::net::SocketAddr = "127.0.0.1:7000".parse().unwrap();
    let mut clients: Vec<RelayClient> = creds
        .iter()
        .enumerate()
        .map(|(i, c)| {
            RelayClient::new(ClientConfig::new(*c, relay_addr, 40 + i as u64), 0).unwrap()
        })
        .collect();
    let (mut to_relay, mut to_clients) = (Vec::new(), Vec::new());
    let mut buf = [0u8; 1500];
    let mut rng = SplitMix64::new(3);
    for step in 1..3000u64 {
        let now = step * 1000;
        relay.handle_timeout(now);
        for (i, c) in clients.iter_mut().enumerate() {
            c.handle_timeout(now);
            while c.next_turn().is_some() {}
            if rng.chance_ppm(30_000) {
                let order: Vec<u8> = (0..rng.below_or_equal(300))
                    .map(|_| rng.next_u64() as u8)
                    .collect();
                let _ = c.submit_order(&order);
            }
            if step % 100 == 0 {
                c.report_checksum(step as u32, step);
            }
            while let Some((_, len)) = c.poll_transmit(now, &mut buf) {
                to_relay.push(buf[..len].to_vec());
                relay.handle_datagram(now, 0, client_addr(i), &buf[..len]);
            }
        }
        while let Some((to, len)) = relay.poll_transmit(now, &mut buf) {
            to_clients.push(buf[..len].to_vec());
            let i = usize::from(to.port() - 8000);
            clients[i].handle_datagram(now, relay_addr, &buf[..len]);
        }
    }
    assert!(to_relay.len() > 200 && to_clients.len() > 200);
    (to_relay, to_clients, creds)
}

fn client_addr(i: usize) -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], 8000 + i as u16))
}

/// The relay's whole receive path (Hello checks, routing, tags, links,
/// message decoding, the sequencer) and the client's, on mutated traffic;
/// half the mutated transport packets are re-signed with the right
/// connection key, as a ticket holder could, so they reach the logic behind
/// the tag. No panic; no connection without a valid ticket.
#[test]
fn fuzz_relay_and_client_receive_paths() {
    use rungs_core::relay::ticket::LobbySecret;
    use rungs_core::relay::{
        ClientConfig, MatchSetup, Relay, RelayClient, RelayConfig, RELAY_LINK_SEAT,
    };
    use rungs_core::wire::packet::write_tag;
    use rungs_core::wire::SessionKey;
    let (to_relay, to_clients, creds) = traffic();
    let secret = LobbySecret::new(*b"fuzz-lobby-key-1").unwrap();
    let mut relay = Relay::new(RelayConfig::new(secret)).unwrap();
    relay.add_match(MatchSetup::new(7, 3, 0b011), 0).unwrap();
    let relay_addr: std::net::SocketAddr = "127.0.0.1:7000".parse().unwrap();
    let mut client = RelayClient::new(ClientConfig::new(creds[0], relay_addr, 40), 0).unwrap();
    // Connection ids and keys of the genuine connections, from their Hellos.
    let keys: Vec<(u32, u8, SessionKey)> = to_relay
        .iter()
        .filter(|d| d[0] == MAGIC)
        .filter_map(|d| {
            let h = read_hello(d).ok()?;
            let seat = h.ticket[1];
            let key = creds[usize::from(seat)].link_secret.connection_key(h.nonce);
            Some((h.nonce as u32, seat, SessionKey(key)))
        })
        .collect();
    // Both genuine connections open first: their Hellos with the cookies
    // they carried, from their own addresses (the cookie key comes from
    // the lobby secret, so it is this relay's too; a cookie is good for
    // 10 s after it was issued).
    let start_us = 1_000_000;
    for hello in to_relay.iter().filter(|d| d[0] == MAGIC) {
        if let Ok(h) = read_hello(hello) {
            if h.cookie != NO_COOKIE {
                relay.handle_datagram(start_us, 0, client_addr(usize::from(h.ticket[1])), hello);
            }
        }
    }
    assert_eq!(relay.connection_count(), 2, "{:?}", relay.counters());
    let mut rng = SplitMix64::new(0xF1A7);
    let mut next_pn = [vec![1000u32; keys.len()], vec![1000u32; keys.len()]];
    let count = iterations(2_000_000, 10_000_000) / 4;
    let started = Instant::now();
    let mut input = Vec::new();
    let mut buf = [0u8; 1500];
    for i in 0..count {
        // 10 µs apart: the connections stay alive (5 s liveness) throughout.
        let now = start_us + i * 10;
        let to_relay_side = rng.chance_ppm(600_000);
        let corpus = if to_relay_side {
            &to_relay
        } else {
            &to_clients
        };
        input.clear();
        input.extend_from_slice(&corpus[rng.below_or_equal(corpus.len() as u64 - 1) as usize]);
        if rng.chance_ppm(800_000) {
            mutate(&mut rng, corpus, &mut input);
        }
        // Where a re-signed packet comes from: mostly its seat's own
        // address (only the newest packet may move a connection, so from
        // elsewhere most are refused before the link's logic).
        let mut signed_by = None;
        if input.first() == Some(&0xB7) && input.len() >= 20 && rng.chance_ppm(500_000) {
            let k = rng.below_or_equal(keys.len() as u64 - 1) as usize;
            let (id, seat, key) = keys[k];
            signed_by = Some(seat);
            input[4..8].copy_from_slice(&id.to_le_bytes());
            // Mostly fresh packet numbers, so the link's logic runs; some
            // replayed or stale ones.
            let side = usize::from(!to_relay_side);
            let pn = if rng.chance_ppm(800_000) {
                next_pn[side][k] += 1;
                next_pn[side][k]
            } else {
                next_pn[side][k].saturating_sub(rng.below_or_equal(50) as u32)
            };
            input[8..12].copy_from_slice(&pn.to_le_bytes());
            let addressee = if to_relay_side {
                input[3] = seat;
                RELAY_LINK_SEAT
            } else {
                input[3] = RELAY_LINK_SEAT;
                seat
            };
            input.truncate(1200);
            write_tag(&mut input, &key, addressee);
        }
        if to_relay_side {
            let from = match signed_by {
                Some(seat) if rng.chance_ppm(900_000) => client_addr(usize::from(seat)),
                _ => client_addr(rng.below_or_equal(2) as usize),
            };
            relay.handle_datagram(now, 0, from, &input);
        } else {
            client.handle_datagram(now, relay_addr, &input);
        }
        if i % 64 == 0 {
            relay.handle_timeout(now);
            client.handle_timeout(now);
            while relay.poll_transmit(now, &mut buf).is_some() {}
            while client.poll_transmit(now, &mut buf).is_some() {}
            while client.next_turn().is_some() {}
            while client.poll_event().is_some() {}
            while relay.poll_event().is_some() {}
        }
        assert!(relay.connection_count() <= 2, "only ticket holders connect");
    }
    let c = *relay.counters();
    let refused = c.not_relay
        + c.malformed_hellos
        + c.rejected.iter().sum::<u64>()
        + c.duplicate_hellos
        + c.unknown_connection
        + c.link_drops;
    report(
        "relay receive path",
        count,
        Some(c.datagrams - refused),
        started,
    );
    eprintln!("relay counters: {c:?}");
    assert!(c.link_drops > 0 && c.malformed_hellos + c.rejected.iter().sum::<u64>() > 0);
}

/// The relay's Hello path on genuine, half-genuine and mutated Hellos:
/// first Hellos with fresh nonces, answers to the relay's own Cookies from
/// the address they went to or another, mutated bytes re-signed with the
/// ticket's link secret half the time (as a ticket holder could), from 64
/// addresses over simulated minutes. No panic; a connection opens only on
/// a Hello carrying a cookie the relay sent to that very address for that
/// nonce; nothing goes back to an unverified address larger than what came.
#[test]
fn fuzz_hello_path_opens_only_with_the_relays_own_cookie() {
    use rungs_core::relay::ticket::{issue, LobbySecret, TicketFields};
    use rungs_core::relay::{MatchSetup, Relay, RelayConfig};
    use std::collections::{HashMap, HashSet, VecDeque};
    let secret = LobbySecret::new(*b"fuzz-lobby-key-2").unwrap();
    let mut config = RelayConfig::new(secret);
    // Connections often enough that the fuzz reaches the opening path.
    config.hello_limits.ticket_interval_us = 20_000;
    let mut relay = Relay::new(config).unwrap();
    let mut setup = MatchSetup::new(9, 4, 0b1111);
    setup.reconnect_grace_us = u64::MAX / 4;
    setup.start_barrier_us = u64::MAX / 4;
    relay.add_match(setup, 0).unwrap();
    let creds: Vec<_> = (0..5u8)
        .map(|seat| {
            let match_id = if seat < 4 { 9 } else { 10 };
            issue(
                &secret,
                &TicketFields {
                    match_id,
                    seat: seat % 4,
                    expires_unix_s: u64::MAX,
                    nonce: u64::from(seat),
                },
            )
            .unwrap()
        })
        .collect();
    let address = |i: u64| std::net::SocketAddr::from(([192, 0, 2, (i % 64) as u8], 4000));
    let hello = |c: usize, nonce: u64, cookie: [u8; COOKIE_BYTES]| {
        let mut buf = [0u8; HELLO_BYTES];
        let h = Hello {
            nonce,
            have_horizon: 0,
            ticket: creds[c].ticket,
            cookie,
        };
        write_hello(&h, &creds[c].link_secret.0, &mut buf).unwrap();
        buf.to_vec()
    };
    // Cookies the relay sent: (to, nonce, cookie), and which ticket asked.
    let mut issued: HashSet<(std::net::SocketAddr, u64, [u8; COOKIE_BYTES])> = HashSet::new();
    let mut recent: VecDeque<(std::net::SocketAddr, u64, [u8; COOKIE_BYTES], usize)> =
        VecDeque::new();
    let mut asked: HashMap<u64, usize> = HashMap::new();
    let corpus: Vec<Vec<u8>> = (0..5).map(|c| hello(c, 1 + c as u64, NO_COOKIE)).collect();
    let mut rng = SplitMix64::new(0xC00C1E);
    let count = iterations(2_000_000, 10_000_000) / 4;
    let started = Instant::now();
    let mut buf = [0u8; 1500];
    let mut opened = 0;
    for i in 0..count {
        let now = 1_000 + i * 37;
        let mut from = address(rng.next_u64());
        let mut input = match rng.below_or_equal(2) {
            0 => {
                let c = rng.below_or_equal(4) as usize;
                let nonce = rng.next_u64() | 1;
                asked.insert(nonce, c);
                hello(c, nonce, NO_COOKIE)
            }
            _ if !recent.is_empty() => {
                let k = rng.below_or_equal(recent.len() as u64 - 1) as usize;
                let (to, nonce, cookie, c) = recent[k];
                if rng.chance_ppm(800_000) {
                    from = to;
                }
                hello(c, nonce, cookie)
            }
            _ => corpus[rng.below_or_equal(4) as usize].clone(),
        };
        if rng.chance_ppm(300_000) {
            mutate(&mut rng, &corpus, &mut input);
            if input.len() == HELLO_BYTES && rng.chance_ppm(500_000) {
                // Re-signed by whoever holds one of the tickets.
                let c = rng.below_or_equal(4) as usize;
                let tag = {
                    use std::hash::Hasher;
                    let key = creds[c].link_secret.0;
                    let mut h = siphasher::sip::SipHasher24::new_with_keys(
                        u64::from_le_bytes(key[..8].try_into().unwrap()),
                        u64::from_le_bytes(key[8..].try_into().unwrap()),
                    );
                    h.write(&input[..HELLO_BYTES - 8]);
                    h.finish()
                };
                input[HELLO_BYTES - 8..].copy_from_slice(&tag.to_le_bytes());
            }
        }
        let before = relay.counters().connections_opened;
        relay.handle_datagram(now, 0, from, &input);
        if relay.counters().connections_opened > before {
            opened += 1;
            let h = read_hello(&input).expect("only a Hello opens");
            assert!(
                issued.contains(&(from, h.nonce, h.cookie)),
                "opened without the relay's cookie for {from}"
            );
        }
        while let Some((to, len)) = relay.poll_transmit(now, &mut buf) {
            if let Ok(c) = read_cookie(&buf[..len]) {
                issued.insert((to, c.nonce, c.cookie));
                if let Some(&t) = asked.get(&c.nonce) {
                    recent.push_back((to, c.nonce, c.cookie, t));
                    if recent.len() > 256 {
                        recent.pop_front();
                    }
                }
            }
        }
        if i % 256 == 0 {
            relay.handle_timeout(now);
            while relay.poll_event().is_some() {}
        }
        assert!(relay.connection_count() <= 4);
    }
    let c = *relay.counters();
    report("relay Hello path", count, Some(opened), started);
    eprintln!("relay counters: {c:?}");
    assert!(c.unverified_bytes_out <= c.unverified_bytes_in, "{c:?}");
    assert!(
        opened > 100,
        "the fuzz reached the opening path {opened} times"
    );
    assert!(c.rejected[RejectReason::Replayed as usize - 1] > 0, "{c:?}");
    assert!(
        c.hellos_limited_by_ticket > 0 && c.hellos_limited_by_address > 0,
        "{c:?}"
    );
}
