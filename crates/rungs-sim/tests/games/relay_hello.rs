//! The relay's Hello path and address rules, sans-IO (S10, `docs/relay.md`
//! "Security"): a return-routability cookie before anything larger than a
//! Hello goes to an address; every captured Hello refused for the ticket's
//! whole life; Hellos rate-limited per address and per ticket; only the
//! newest authentic packet moves a connection.

use std::net::SocketAddr;

use rungs_core::relay::ticket::{issue, Credentials, LobbySecret, TicketFields};
use rungs_core::relay::{ClientConfig, ClientEvent, MatchSetup, Relay, RelayClient, RelayConfig};
use rungs_core::wire::relay::{
    read_cookie, read_reject, RejectReason, COOKIE_DATAGRAM_BYTES, HELLO_BYTES, NO_COOKIE,
};
use rungs_sim::SplitMix64;

use crate::hello;
use hello::{exchange, hello_bytes, hello_with_cookie};

const MS: u64 = 1000;
const S: u64 = 1_000_000;
const MATCH: u64 = 42;
const UNIX: u64 = 1_800_000_000;

fn secret() -> LobbySecret {
    LobbySecret::new(*b"hello-lobby-key1").unwrap()
}

fn credentials(match_id: u64, seat: u8) -> Credentials {
    issue(
        &secret(),
        &TicketFields {
            match_id,
            seat,
            expires_unix_s: UNIX + 6 * 3600,
            nonce: 77 + u64::from(seat),
        },
    )
    .unwrap()
}

fn relay() -> Relay {
    let mut relay = Relay::new(RelayConfig::new(secret())).unwrap();
    let mut setup = MatchSetup::new(MATCH, 4, 0b1111);
    setup.reconnect_grace_us = 3600 * S;
    relay.add_match(setup, 0).unwrap();
    relay
}

fn addr(host: u8, port: u16) -> SocketAddr {
    SocketAddr::from(([198, 51, 100, host], port))
}

#[test]
fn a_hello_without_a_cookie_gets_a_cookie_and_nothing_else() {
    let mut r = relay();
    let creds = credentials(MATCH, 1);
    let first = hello_bytes(&creds, 5, NO_COOKIE);
    assert_eq!(first.len(), HELLO_BYTES);
    let (answers, others) = exchange(&mut r, 10 * MS, UNIX, addr(1, 1000), &first);
    assert!(others.is_empty());
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].len(), COOKIE_DATAGRAM_BYTES);
    let cookie = read_cookie(&answers[0]).unwrap();
    assert_eq!(cookie.nonce, 5);
    assert_eq!(
        r.connection_count(),
        0,
        "no state before the cookie returns"
    );
    // With the cookie: welcomed (a link packet, larger than the Hello).
    let (answers, _) = exchange(
        &mut r,
        20 * MS,
        UNIX,
        addr(1, 1000),
        &hello_bytes(&creds, 5, cookie.cookie),
    );
    assert_eq!(r.connection_count(), 1);
    assert!(answers.iter().any(|a| a[0] == 0xB7), "{answers:?}");
    // The cookie is bound to the address and the nonce.
    let mut other = relay();
    let (answers, _) = exchange(
        &mut other,
        20 * MS,
        UNIX,
        addr(1, 1001),
        &hello_bytes(&creds, 5, cookie.cookie),
    );
    assert!(
        read_cookie(&answers[0]).is_ok(),
        "another port: a new cookie"
    );
    let (answers, _) = exchange(
        &mut other,
        20 * MS,
        UNIX,
        addr(1, 1000),
        &hello_bytes(&creds, 6, cookie.cookie),
    );
    assert!(
        read_cookie(&answers[0]).is_ok(),
        "another nonce: a new cookie"
    );
    assert_eq!(other.connection_count(), 0);
    let c = *other.counters();
    assert!(c.unverified_bytes_out <= c.unverified_bytes_in, "{c:?}");
}

#[test]
fn a_stale_cookie_gets_a_fresh_one() {
    let mut r = relay();
    let creds = credentials(MATCH, 0);
    let (answers, _) = exchange(
        &mut r,
        S,
        UNIX,
        addr(2, 1),
        &hello_bytes(&creds, 9, NO_COOKIE),
    );
    let cookie = read_cookie(&answers[0]).unwrap().cookie;
    // Eleven seconds later (cookies are good for ten).
    let (answers, _) = exchange(
        &mut r,
        12 * S,
        UNIX,
        addr(2, 1),
        &hello_bytes(&creds, 9, cookie),
    );
    let fresh = read_cookie(&answers[0]).unwrap().cookie;
    assert_ne!(fresh, cookie);
    assert_eq!(r.connection_count(), 0);
    exchange(
        &mut r,
        12 * S,
        UNIX,
        addr(2, 1),
        &hello_bytes(&creds, 9, fresh),
    );
    assert_eq!(r.connection_count(), 1);
}

/// The audit's attack: a seat connected ten times; every Hello it sent was
/// captured; each is replayed from other addresses and from its own, soon
/// and an hour later. None opens a connection or moves the seat's traffic.
#[test]
fn every_captured_hello_is_refused_for_the_tickets_whole_life() {
    let mut r = relay();
    let creds = credentials(MATCH, 2);
    let home = addr(3, 4000);
    let mut captured: Vec<(SocketAddr, Vec<u8>)> = Vec::new();
    let mut now = 10 * MS;
    for nonce in 1..=10u64 {
        // A fresh connection every 3 s (within the per-ticket allowance).
        now += 3 * S;
        captured.push((home, hello_bytes(&creds, nonce, NO_COOKIE)));
        let (with_cookie, _) = hello_with_cookie(&mut r, now, UNIX, home, &creds, nonce);
        captured.push((home, with_cookie));
    }
    assert_eq!(r.counters().connections_opened, 10);
    let opened = r.counters().connections_opened;
    let mut rng = SplitMix64::new(26);
    for (when, elsewhere) in [(now + MS, true), (now + 2 * MS, false), (now + 5 * S, true)]
        .into_iter()
        .chain([(now + 3600 * S, true), (now + 3600 * S + MS, false)])
    {
        for (from, hello) in &captured {
            let source = if elsewhere {
                addr(100 + rng.below_or_equal(100) as u8, 5000)
            } else {
                *from
            };
            let (answers, others) = exchange(&mut r, when, UNIX, source, hello);
            // Nothing but a Cookie or a Reject ever goes to the replayer.
            for a in &answers {
                assert!(
                    read_cookie(a).is_ok() || read_reject(a).is_ok(),
                    "a replay got {a:?}"
                );
                assert!(a.len() < hello.len());
            }
            // The seat's traffic stays at home.
            for (to, _) in &others {
                assert_eq!(*to, home, "seat traffic went to {to}");
            }
        }
    }
    assert_eq!(
        r.counters().connections_opened,
        opened,
        "no replay opened a connection"
    );
    assert_eq!(r.connection_count(), 1);
    let c = *r.counters();
    assert!(c.rejected[RejectReason::Replayed as usize - 1] > 0, "{c:?}");
    assert!(c.unverified_bytes_out <= c.unverified_bytes_in, "{c:?}");
}

#[test]
fn hellos_without_a_cookie_are_limited_per_address() {
    let mut r = relay();
    let creds = credentials(MATCH, 0);
    let mut answered = 0;
    // 1000 Hellos in one second from one host (any port).
    for i in 0..1000u64 {
        let (answers, _) = exchange(
            &mut r,
            S + i * MS,
            UNIX,
            addr(7, 1000 + i as u16),
            &hello_bytes(&creds, 100 + i, NO_COOKIE),
        );
        answered += answers.len();
    }
    // A burst of 32, then 16 a second.
    assert!((32..=32 + 17).contains(&answered), "{answered} answered");
    assert!(r.counters().hellos_limited_by_address >= 1000 - 49);
    // Another host is not affected.
    let (answers, _) = exchange(
        &mut r,
        2 * S,
        UNIX,
        addr(8, 1),
        &hello_bytes(&creds, 5000, NO_COOKIE),
    );
    assert_eq!(answers.len(), 1);
    // Forged tickets count against the same allowance, before any MAC.
    let mut forged = creds;
    forged.ticket[30] ^= 1;
    let before = r.counters().rejected[RejectReason::BadTicket as usize - 1];
    for i in 0..100u64 {
        exchange(
            &mut r,
            3 * S,
            UNIX,
            addr(9, 1),
            &hello_bytes(&forged, 1 + i, NO_COOKIE),
        );
    }
    let bad = r.counters().rejected[RejectReason::BadTicket as usize - 1] - before;
    assert_eq!(bad, 32, "only the burst was looked at");
}

#[test]
fn a_ticket_opens_connections_at_most_at_its_rate() {
    // A ticket holder reconnecting from many addresses it really holds
    // (each answers its cookie): 8 at once, then one every 2 s.
    let mut r = relay();
    let creds = credentials(MATCH, 3);
    for i in 0..100u64 {
        hello_with_cookie(
            &mut r,
            S + i * MS,
            UNIX,
            addr(10 + (i % 50) as u8, 1),
            &creds,
            1 + i,
        );
    }
    assert_eq!(r.counters().connections_opened, 8);
    assert_eq!(r.counters().hellos_limited_by_ticket, 92);
    hello_with_cookie(&mut r, 3 * S, UNIX, addr(90, 1), &creds, 1000);
    assert_eq!(r.counters().connections_opened, 9);
    // Other seats are not affected.
    hello_with_cookie(
        &mut r,
        3 * S,
        UNIX,
        addr(91, 1),
        &credentials(MATCH, 0),
        2000,
    );
    assert_eq!(r.counters().connections_opened, 10);
}

#[test]
fn a_rate_limited_client_gets_in_by_itself() {
    // A genuine client whose seat used its allowance: its Hellos are
    // dropped, it keeps saying Hello, and is welcomed when allowed.
    let mut r = relay();
    let creds = credentials(MATCH, 1);
    for i in 0..8u64 {
        hello_with_cookie(&mut r, S, UNIX, addr(20, 1), &creds, 1 + i);
    }
    let relay_addr: SocketAddr = "192.0.2.1:7000".parse().unwrap();
    let me = addr(21, 1);
    let mut client = RelayClient::new(ClientConfig::new(creds, relay_addr, 99), S).unwrap();
    let mut buf = [0u8; 1500];
    let mut welcomed_at = None;
    for step in 0..5000u64 {
        let now = S + step * MS;
        client.handle_timeout(now);
        while let Some((_, len)) = client.poll_transmit(now, &mut buf) {
            r.handle_datagram(now, UNIX, me, &buf[..len]);
        }
        r.handle_timeout(now);
        while let Some((to, len)) = r.poll_transmit(now, &mut buf) {
            if to == me {
                client.handle_datagram(now, relay_addr, &buf[..len]);
            }
        }
        while let Some(e) = client.poll_event() {
            if matches!(e, ClientEvent::Welcomed { .. }) && welcomed_at.is_none() {
                welcomed_at = Some(now);
            }
        }
    }
    let at = welcomed_at.expect("welcomed");
    assert!((3 * S..=3 * S + 300 * MS).contains(&at), "welcomed at {at}");
    assert!(r.counters().hellos_limited_by_ticket > 0);
}

#[test]
fn only_the_newest_authentic_packet_moves_a_connection() {
    // A match of one human: it starts on its Hello and streams bundles.
    let mut r = Relay::new(RelayConfig::new(secret())).unwrap();
    r.add_match(MatchSetup::new(MATCH, 2, 0b01), 0).unwrap();
    let creds = credentials(MATCH, 0);
    let relay_addr: SocketAddr = "192.0.2.1:7000".parse().unwrap();
    let home = addr(30, 1);
    let mut client = RelayClient::new(ClientConfig::new(creds, relay_addr, 7), 0).unwrap();
    let mut buf = [0u8; 1500];
    let mut sent: Vec<Vec<u8>> = Vec::new();
    let mut to_addresses: Vec<SocketAddr> = Vec::new();
    let mut step = |r: &mut Relay, client: &mut RelayClient, now: u64, from: SocketAddr| {
        let mut out = Vec::new();
        client.handle_timeout(now);
        while let Some((_, len)) = client.poll_transmit(now, &mut buf) {
            out.push(buf[..len].to_vec());
            r.handle_datagram(now, UNIX, from, &buf[..len]);
        }
        r.handle_timeout(now);
        let mut to = Vec::new();
        while let Some((dest, len)) = r.poll_transmit(now, &mut buf) {
            to.push(dest);
            if dest == from {
                client.handle_datagram(now, relay_addr, &buf[..len]);
            }
        }
        (out, to)
    };
    for ms in 1..=2000u64 {
        let (out, to) = step(&mut r, &mut client, ms * MS, home);
        sent.extend(out.into_iter().filter(|d| d[0] == 0xB7));
        to_addresses.extend(to);
    }
    assert!(client.is_connected());
    assert!(sent.len() > 20);
    // Old packets replayed from elsewhere: refused, the connection stays.
    let thief = addr(66, 6);
    for old in &sent[..sent.len() - 1] {
        r.handle_datagram(2001 * MS, UNIX, thief, old);
    }
    assert_eq!(r.counters().rebinds, 0);
    assert_eq!(r.counters().moves_refused as usize, sent.len() - 1);
    let (_, to) = step(&mut r, &mut client, 2002 * MS, home);
    assert!(to.iter().all(|a| *a == home), "{to:?}");
    // The client's own next packets from a new NAT mapping move it.
    let moved = addr(30, 2);
    for ms in 2003..2100u64 {
        step(&mut r, &mut client, ms * MS, moved);
    }
    assert_eq!(r.counters().rebinds, 1);
    let (_, to) = step(&mut r, &mut client, 2100 * MS, moved);
    assert!(to.iter().all(|a| *a == moved), "{to:?}");
    assert!(to_addresses.iter().all(|a| *a == home));
}

/// A seeded storm of everything an attacker without a link secret can
/// send, from many addresses: garbage, forged and expired tickets, tickets
/// of other matches, captured Hellos. Nothing larger than what came in
/// goes out to them, and nothing opens.
#[test]
fn a_storm_from_many_addresses_is_answered_with_fewer_bytes_and_opens_nothing() {
    let mut r = relay();
    let mut other_match = MatchSetup::new(MATCH + 1, 2, 0b11);
    other_match.reconnect_grace_us = 3600 * S;
    r.add_match(other_match, 0).unwrap();
    let genuine = credentials(MATCH, 0);
    let other = credentials(MATCH + 1, 0);
    let unknown = credentials(999, 0);
    let expired = issue(
        &secret(),
        &TicketFields {
            match_id: MATCH,
            seat: 1,
            expires_unix_s: UNIX - 1,
            nonce: 1,
        },
    )
    .unwrap();
    let (captured, _) = hello_with_cookie(&mut r, 10 * MS, UNIX, addr(1, 1), &genuine, 55);
    let opened = r.counters().connections_opened;
    let mut rng = SplitMix64::new(0x5707);
    let mut bytes_in = 0u64;
    let mut bytes_out = 0u64;
    for i in 0..50_000u64 {
        let now = S + i * 20;
        let from = SocketAddr::from((
            [
                10,
                rng.below_or_equal(255) as u8,
                rng.below_or_equal(255) as u8,
                1,
            ],
            1000 + rng.below_or_equal(5) as u16,
        ));
        let datagram = match rng.below_or_equal(6) {
            0 => (0..rng.below_or_equal(100))
                .map(|_| rng.next_u64() as u8)
                .collect(),
            1 => {
                let mut forged = genuine;
                forged.ticket[rng.below_or_equal(41) as usize] ^= 4;
                hello_bytes(&forged, rng.next_u64() | 1, NO_COOKIE)
            }
            2 => hello_bytes(&expired, rng.next_u64() | 1, NO_COOKIE),
            3 => hello_bytes(&unknown, rng.next_u64() | 1, NO_COOKIE),
            4 => hello_bytes(&other, rng.next_u64() | 1, [rng.next_u64() as u8; 16]),
            5 => captured.clone(),
            _ => {
                let mut h = hello_bytes(&genuine, 55, NO_COOKIE);
                h[1] = 2; // an older version
                h
            }
        };
        let (answers, _) = exchange(&mut r, now, UNIX, from, &datagram);
        bytes_in += datagram.len() as u64;
        bytes_out += answers.iter().map(|a| a.len() as u64).sum::<u64>();
    }
    assert_eq!(r.counters().connections_opened, opened);
    assert!(bytes_out <= bytes_in, "{bytes_out} out for {bytes_in} in");
    let c = *r.counters();
    assert!(c.unverified_bytes_out <= c.unverified_bytes_in, "{c:?}");
    assert!(
        c.cookies_sent > 0 && c.rejected.iter().sum::<u64>() > 0,
        "{c:?}"
    );
}
