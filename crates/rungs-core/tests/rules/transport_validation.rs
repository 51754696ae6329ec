//! Packet validation at the endpoint (S8): every bad datagram is dropped,
//! counted under its reason, and never acted on. One test per attack the
//! issue names (spoofed source, wrong key, wrong session, replay), plus the
//! remaining reasons.

use std::net::SocketAddr;

use rungs_core::link::{DropReason, Endpoint, EndpointConfig, LinkConfig};
use rungs_core::wire::{SessionKey, MAX_PACKET_BYTES};

const KEY: SessionKey = SessionKey(*b"0123456789abcdef");
const SESSION: u32 = 77;

fn addr(last: u8) -> SocketAddr {
    SocketAddr::from(([192, 0, 2, last], 5000))
}

fn endpoint(seat: u8, key: SessionKey, session_id: u32, peers: &[(u8, SocketAddr)]) -> Endpoint {
    let mut e = Endpoint::new(EndpointConfig {
        session_id,
        key,
        local_seat: seat,
        link: LinkConfig::default(),
    })
    .unwrap();
    for &(seat, address) in peers {
        e.add_peer(seat, address, 0).unwrap();
    }
    e
}

/// Seat 0 at addr(1) queues `payload` for seat 1 and returns the datagram.
fn datagram_from_seat0(sender: &mut Endpoint, payload: &[u8]) -> Vec<u8> {
    sender.send(1, payload).unwrap();
    let mut buf = [0u8; MAX_PACKET_BYTES];
    let t = sender.poll_transmit(1_000, &mut buf).unwrap();
    assert_eq!(t.seat, 1);
    buf[..t.len].to_vec()
}

fn receiver() -> Endpoint {
    endpoint(1, KEY, SESSION, &[(0, addr(1)), (2, addr(3))])
}

fn sender() -> Endpoint {
    endpoint(0, KEY, SESSION, &[(1, addr(2))])
}

fn nothing_acted_on(receiver: &mut Endpoint) {
    assert_eq!(receiver.recv(), None, "no message reached the engine");
    let link = receiver.link(0).unwrap();
    assert_eq!(link.stats(0).packets_received, 0);
    assert_eq!(link.stats(0).last_heard_us, None);
    let mut buf = [0u8; MAX_PACKET_BYTES];
    assert_eq!(receiver.poll_transmit(2_000, &mut buf), None, "no ack owed");
}

#[test]
fn spoofed_source_address_is_dropped_and_counted() {
    let mut s = sender();
    let mut r = receiver();
    let d = datagram_from_seat0(&mut s, b"attack at dawn");
    // From another address, a packet that is not authentic is spoofed.
    let mut forged = d.clone();
    let last = forged.len() - 1;
    forged[last] ^= 1;
    assert_eq!(
        r.handle_datagram(2_000, addr(9), &forged),
        Err(DropReason::SpoofedAddress)
    );
    // Seat 2's own address cannot speak for seat 0 with it either.
    assert_eq!(
        r.handle_datagram(2_000, addr(3), &forged),
        Err(DropReason::SpoofedAddress)
    );
    assert_eq!(
        r.link(0).unwrap().dropped().get(DropReason::SpoofedAddress),
        2
    );
    nothing_acted_on(&mut r);
    // The genuine datagram goes through from the bound address.
    assert_eq!(r.handle_datagram(2_000, addr(1), &d), Ok(0));
    assert_eq!(r.recv(), Some((0, b"attack at dawn".to_vec())));
    // A copy of it from elsewhere is no move (not the newest packet).
    assert_eq!(
        r.handle_datagram(2_000, addr(9), &d),
        Err(DropReason::SpoofedAddress)
    );
    assert_eq!(r.peers().next(), Some((0, addr(1))));
}

#[test]
fn wrong_key_is_dropped_and_counted() {
    let mut forger = endpoint(
        0,
        SessionKey(*b"not-the-real-key"),
        SESSION,
        &[(1, addr(2))],
    );
    let mut r = receiver();
    let d = datagram_from_seat0(&mut forger, b"forged order");
    assert_eq!(
        r.handle_datagram(2_000, addr(1), &d),
        Err(DropReason::BadTag)
    );
    assert_eq!(r.link(0).unwrap().dropped().get(DropReason::BadTag), 1);
    nothing_acted_on(&mut r);
}

#[test]
fn a_packet_redirected_to_another_seat_fails_its_tag() {
    // Seat 0's packet for seat 1, replayed to seat 2 from seat 0's address.
    let mut s = endpoint(0, KEY, SESSION, &[(1, addr(2)), (2, addr(3))]);
    let d = datagram_from_seat0(&mut s, b"for seat 1 only");
    let mut seat2 = endpoint(2, KEY, SESSION, &[(0, addr(1))]);
    assert_eq!(
        seat2.handle_datagram(2_000, addr(1), &d),
        Err(DropReason::BadTag)
    );
    assert_eq!(seat2.recv(), None);
}

#[test]
fn wrong_session_is_dropped_and_counted() {
    let mut other_game = endpoint(0, KEY, SESSION + 1, &[(1, addr(2))]);
    let mut r = receiver();
    let d = datagram_from_seat0(&mut other_game, b"last game's order");
    assert_eq!(
        r.handle_datagram(2_000, addr(1), &d),
        Err(DropReason::WrongSession)
    );
    assert_eq!(r.unattributed_drops().get(DropReason::WrongSession), 1);
    assert_eq!(r.total_drops().get(DropReason::WrongSession), 1);
    nothing_acted_on(&mut r);
}

#[test]
fn replayed_packet_is_dropped_and_counted() {
    let mut s = sender();
    let mut r = receiver();
    let d = datagram_from_seat0(&mut s, b"build refinery");
    assert_eq!(r.handle_datagram(2_000, addr(1), &d), Ok(0));
    assert_eq!(r.recv(), Some((0, b"build refinery".to_vec())));
    // The same bytes again, now and much later: never a second delivery.
    for at in [2_001, 60_000_000] {
        assert_eq!(
            r.handle_datagram(at, addr(1), &d),
            Err(DropReason::Replayed)
        );
    }
    assert_eq!(r.recv(), None);
    let stats = r.link(0).unwrap().stats(0);
    assert_eq!(stats.dropped.get(DropReason::Replayed), 2);
    assert_eq!(stats.packets_received, 1);
    assert_eq!(
        stats.last_heard_us,
        Some(2_000),
        "a replay is not a sign of life"
    );
}

#[test]
fn stale_packets_outside_the_window_are_dropped() {
    let mut s = sender();
    let mut r = receiver();
    let mut buf = [0u8; MAX_PACKET_BYTES];
    let mut datagrams = Vec::new();
    for i in 0..70u8 {
        s.send(1, &[i]).unwrap();
        // A fresh instant each time, so nothing is piggybacked twice at once.
        while let Some(t) = s.poll_transmit(u64::from(i) * 1000 + 1000, &mut buf) {
            datagrams.push(buf[..t.len].to_vec());
        }
    }
    let newest = datagrams.last().unwrap().clone();
    assert_eq!(r.handle_datagram(100_000, addr(1), &newest), Ok(0));
    assert_eq!(
        r.handle_datagram(100_000, addr(1), &datagrams[0]),
        Err(DropReason::OutsideWindow)
    );
    assert_eq!(
        r.link(0).unwrap().dropped().get(DropReason::OutsideWindow),
        1
    );
}

#[test]
fn prefix_failures_unknown_senders_and_garbage_are_counted() {
    let mut s = sender();
    let mut r = receiver();
    let d = datagram_from_seat0(&mut s, b"x");
    let cases: Vec<(Vec<u8>, DropReason)> = vec![
        (d[..10].to_vec(), DropReason::TooShort),
        (
            {
                let mut b = d.clone();
                b.resize(MAX_PACKET_BYTES + 1, 0);
                b
            },
            DropReason::TooLong,
        ),
        (
            {
                let mut b = d.clone();
                b[0] ^= 0xFF;
                b
            },
            DropReason::BadMagic,
        ),
        (
            {
                let mut b = d.clone();
                b[3] = 7;
                b
            },
            DropReason::UnknownSender,
        ),
        (
            {
                let mut b = d.clone();
                b[3] = 1;
                b
            },
            DropReason::UnknownSender,
        ),
    ];
    let mut expected = rungs_core::link::DropCounts::default();
    for (bytes, reason) in &cases {
        assert_eq!(r.handle_datagram(2_000, addr(1), bytes), Err(*reason));
        expected.count(*reason);
    }
    // Our own seat (1) as the sender is unknown too: no link speaks as us.
    assert_eq!(r.unattributed_drops(), &expected);
    // Another version from an address no peer is bound to: unattributed,
    // and nothing to report.
    let mut other_version = d.clone();
    other_version[1] = 99;
    assert_eq!(
        r.handle_datagram(2_000, addr(9), &other_version),
        Err(DropReason::BadVersion)
    );
    expected.count(DropReason::BadVersion);
    assert_eq!(r.unattributed_drops(), &expected);
    assert_eq!(r.poll_protocol_mismatch(), None);
    // From seat 0's address: counted on its link, reported once.
    for _ in 0..3 {
        assert_eq!(
            r.handle_datagram(2_000, addr(1), &other_version),
            Err(DropReason::BadVersion)
        );
    }
    assert_eq!(r.unattributed_drops(), &expected);
    assert_eq!(r.link(0).unwrap().dropped().get(DropReason::BadVersion), 3);
    let reported = r.poll_protocol_mismatch().unwrap();
    assert_eq!(
        reported.to_string(),
        "seat 0 speaks wire protocol 99; this build speaks 4"
    );
    assert_eq!(r.poll_protocol_mismatch(), None);
    // Flipping any single bit of a genuine packet is caught.
    for i in 0..d.len() {
        let mut b = d.clone();
        b[i] ^= 0x10;
        assert!(
            r.handle_datagram(2_000, addr(1), &b).is_err(),
            "bit flip at {i}"
        );
    }
    nothing_acted_on(&mut r);
}
