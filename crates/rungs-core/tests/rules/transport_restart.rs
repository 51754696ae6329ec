//! S8 restarts, moves and keys at the endpoint: a restarted peer is seen as
//! a restart (never silently truncated), a peer that changes address keeps
//! its link on an authenticated packet, the all-zero key is refused, and
//! per-pair keys stop one player signing as another.

use std::net::SocketAddr;

use rungs_core::link::{DropReason, Endpoint, EndpointConfig, LinkConfig, LinkEvent};
use rungs_core::wire::SessionKey;

const KEY: SessionKey = SessionKey([0x5A; 16]);

fn addr(last: u8, port: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, last], port))
}

fn endpoint(seat: u8, epoch: u32, key: SessionKey) -> Endpoint {
    let mut e = Endpoint::new(EndpointConfig {
        session_id: 7,
        key,
        local_seat: seat,
        link: LinkConfig::default(),
    })
    .unwrap();
    e.set_epoch(epoch).unwrap();
    e
}

/// Move every datagram from `from` (at `from_addr`) to `to`, instantly.
fn pump(now: u64, from: &mut Endpoint, from_addr: SocketAddr, to: &mut Endpoint) -> usize {
    let mut buf = [0u8; 1500];
    let mut n = 0;
    while let Some(t) = from.poll_transmit(now, &mut buf) {
        let _ = to.handle_datagram(now, from_addr, &buf[..t.len]);
        n += 1;
    }
    n
}

fn drain(e: &mut Endpoint) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some((_, m)) = e.recv() {
        out.push(m);
    }
    out
}

#[test]
fn a_restarted_peer_is_a_restart_not_a_truncation() {
    // The fault: once the new packet numbers passed the old ones, the first
    // messages were dropped as duplicates and still acknowledged (100 of 200).
    let (a_addr, b_addr) = (addr(1, 1000), addr(2, 1000));
    let mut a = endpoint(0, 1, KEY);
    a.add_peer(1, b_addr, 0).unwrap();
    let mut b = endpoint(1, 1, KEY);
    b.add_peer(0, a_addr, 0).unwrap();
    let mut now = 0;
    for i in 0..200u32 {
        b.send(0, &i.to_le_bytes()).unwrap();
        now += 1000;
        pump(now, &mut b, b_addr, &mut a);
        pump(now, &mut a, a_addr, &mut b);
    }
    assert_eq!(drain(&mut a).len(), 200);
    // B restarts: a new run, a newer epoch, numbers from 0 again.
    let mut b = endpoint(1, 2, KEY);
    b.add_peer(0, a_addr, now).unwrap();
    for i in 0..200u32 {
        b.send(0, &(1000 + i).to_le_bytes()).unwrap();
        now += 1000;
        pump(now, &mut b, b_addr, &mut a);
        pump(now, &mut a, a_addr, &mut b);
    }
    let got = drain(&mut a);
    assert_eq!(got.len(), 200, "every message of the new run arrives");
    assert_eq!(got[0], 1000u32.to_le_bytes());
    let mut events = Vec::new();
    while let Some(e) = a.poll_event() {
        events.push(e);
    }
    assert!(events.contains(&(1, LinkEvent::Restarted)), "{events:?}");
    assert_eq!(a.link(1).unwrap().stats(now).restarts, 1);
    // A sends nothing but acks: the last ones wait out the max ack delay,
    // a timer like any other.
    now += LinkConfig::default().max_ack_delay_us;
    assert!(a.poll_timeout().is_some_and(|due| due <= now));
    a.handle_timeout(now);
    pump(now, &mut a, a_addr, &mut b);
    assert_eq!(
        b.link(0).unwrap().stats(now).messages_in_flight,
        0,
        "all acknowledged"
    );
}

#[test]
fn a_peer_restarted_with_the_same_epoch_is_a_restart_and_loses_nothing() {
    // The audit: an engine passing a constant epoch restarted a peer, and
    // 20 of 40 messages of the new run vanished while the sender believed
    // them all acknowledged. Runs differ by their random nonces now.
    let (a_addr, b_addr) = (addr(1, 1000), addr(2, 1000));
    let mut a = endpoint(0, 7, KEY);
    a.add_peer(1, b_addr, 0).unwrap();
    let mut b = endpoint(1, 7, KEY);
    b.add_peer(0, a_addr, 0).unwrap();
    let mut now = 0;
    for i in 0..20u32 {
        b.send(0, &i.to_le_bytes()).unwrap();
        now += 1000;
        pump(now, &mut b, b_addr, &mut a);
        pump(now, &mut a, a_addr, &mut b);
    }
    assert_eq!(drain(&mut a).len(), 20);
    // B restarts with the same epoch.
    let mut b = endpoint(1, 7, KEY);
    assert_ne!(
        b.connection_nonce(),
        a.link(1).unwrap().peer_nonce().unwrap()
    );
    b.add_peer(0, a_addr, now).unwrap();
    for i in 0..40u32 {
        b.send(0, &(1000 + i).to_le_bytes()).unwrap();
        now += 1000;
        pump(now, &mut b, b_addr, &mut a);
        pump(now, &mut a, a_addr, &mut b);
    }
    let got = drain(&mut a);
    assert_eq!(got.len(), 40, "every message of the new run arrives");
    assert_eq!(got[0], 1000u32.to_le_bytes());
    let mut events = Vec::new();
    while let Some(e) = a.poll_event() {
        events.push(e);
    }
    assert!(events.contains(&(1, LinkEvent::Restarted)), "{events:?}");
    now += LinkConfig::default().max_ack_delay_us;
    a.handle_timeout(now);
    pump(now, &mut a, a_addr, &mut b);
    assert_eq!(b.link(0).unwrap().stats(now).messages_in_flight, 0);
}

#[test]
fn a_late_packet_of_a_run_before_a_same_epoch_restart_is_stale() {
    let (a_addr, b_addr) = (addr(1, 1000), addr(2, 1000));
    let mut a = endpoint(0, 3, KEY);
    a.add_peer(1, b_addr, 0).unwrap();
    let mut old_b = endpoint(1, 3, KEY);
    old_b.add_peer(0, a_addr, 0).unwrap();
    old_b.send(0, b"old").unwrap();
    pump(10, &mut old_b, b_addr, &mut a);
    assert_eq!(drain(&mut a), vec![b"old".to_vec()]);
    let mut new_b = endpoint(1, 3, KEY);
    new_b.add_peer(0, a_addr, 0).unwrap();
    new_b.send(0, b"new").unwrap();
    pump(20, &mut new_b, b_addr, &mut a);
    // A packet the old run sent before it stopped, arriving late (or
    // replayed): neither a restart back nor taken.
    old_b.send(0, b"late").unwrap();
    let mut buf = [0u8; 1500];
    let t = old_b.poll_transmit(30, &mut buf).unwrap();
    assert_eq!(
        a.handle_datagram(30, b_addr, &buf[..t.len]),
        Err(DropReason::StaleEpoch)
    );
    assert_eq!(drain(&mut a), vec![b"new".to_vec()]);
    assert_eq!(a.link(1).unwrap().stats(30).restarts, 1);
}

#[test]
fn a_packet_addressed_to_our_earlier_run_is_dropped() {
    // B heard A's first run; A restarts with the same epoch. What B sends
    // before it hears the new run names the old nonce, and A drops it
    // rather than take B's numbers and acks for its own.
    let (a_addr, b_addr) = (addr(1, 1000), addr(2, 1000));
    let mut old_a = endpoint(0, 3, KEY);
    old_a.add_peer(1, b_addr, 0).unwrap();
    let mut b = endpoint(1, 3, KEY);
    b.add_peer(0, a_addr, 0).unwrap();
    old_a.send(1, b"hello").unwrap();
    pump(10, &mut old_a, a_addr, &mut b);
    let mut new_a = endpoint(0, 3, KEY);
    new_a.add_peer(1, b_addr, 0).unwrap();
    b.send(0, b"to the old run").unwrap();
    let mut buf = [0u8; 1500];
    let t = b.poll_transmit(20, &mut buf).unwrap();
    assert_eq!(
        new_a.handle_datagram(20, b_addr, &buf[..t.len]),
        Err(DropReason::StaleEpoch)
    );
    assert!(drain(&mut new_a).is_empty());
}

#[test]
fn packets_of_an_earlier_connection_are_dropped() {
    let (a_addr, b_addr) = (addr(1, 1000), addr(2, 1000));
    let mut a = endpoint(0, 1, KEY);
    a.add_peer(1, b_addr, 0).unwrap();
    let mut old_b = endpoint(1, 5, KEY);
    old_b.add_peer(0, a_addr, 0).unwrap();
    let mut new_b = endpoint(1, 6, KEY);
    new_b.add_peer(0, a_addr, 0).unwrap();
    new_b.send(0, b"new").unwrap();
    pump(10, &mut new_b, b_addr, &mut a);
    old_b.send(0, b"old").unwrap();
    let mut buf = [0u8; 1500];
    let t = old_b.poll_transmit(20, &mut buf).unwrap();
    assert_eq!(
        a.handle_datagram(20, b_addr, &buf[..t.len]),
        Err(DropReason::StaleEpoch)
    );
    assert_eq!(drain(&mut a), vec![b"new".to_vec()]);
}

#[test]
fn a_peer_that_moves_keeps_its_link_on_an_authenticated_packet() {
    let (a_addr, b_addr, b_moved) = (addr(1, 1000), addr(2, 1000), addr(2, 2000));
    let mut a = endpoint(0, 1, KEY);
    a.add_peer(1, b_addr, 0).unwrap();
    let mut b = endpoint(1, 1, KEY);
    b.add_peer(0, a_addr, 0).unwrap();
    b.send(0, b"one").unwrap();
    pump(10, &mut b, b_addr, &mut a);
    // A forgery from the new address is no move.
    let mut forged = [0u8; 64];
    forged[..4].copy_from_slice(&[0xB7, rungs_core::wire::packet::VERSION, 0, 1]);
    assert!(a.handle_datagram(15, b_moved, &forged).is_err());
    assert_eq!(a.peers().next(), Some((1, b_addr)));
    // The real peer, rebound by its NAT.
    b.send(0, b"two").unwrap();
    pump(20, &mut b, b_moved, &mut a);
    assert_eq!(a.peers().next(), Some((1, b_moved)));
    assert_eq!(drain(&mut a), vec![b"one".to_vec(), b"two".to_vec()]);
    assert_eq!(a.link(1).unwrap().stats(20).address_changes, 1);
    // And A's packets now go to the new address.
    a.send(1, b"back").unwrap();
    let mut buf = [0u8; 1500];
    let t = a.poll_transmit(30, &mut buf).unwrap();
    assert_eq!(t.destination, b_moved);
}

#[test]
fn an_all_zero_key_is_refused() {
    assert!(Endpoint::new(EndpointConfig {
        session_id: 1,
        key: SessionKey([0; 16]),
        local_seat: 0,
        link: LinkConfig::default(),
    })
    .is_err());
    let mut e = endpoint(0, 1, KEY);
    e.add_peer(1, addr(2, 1), 0).unwrap();
    assert!(e.set_link_key(1, SessionKey([0; 16])).is_err());
}

#[test]
fn with_per_pair_keys_a_third_player_cannot_sign_as_another() {
    // Seats 0, 1, 2. Pair keys: 0-1 K01, 0-2 K02, 1-2 K12. Seat 2 knows
    // K02 and K12 but not K01: spoofing seat 1's address and seat number
    // to seat 0 fails the tag.
    let k01 = SessionKey([1; 16]);
    let k02 = SessionKey([2; 16]);
    let (a_addr, b_addr) = (addr(1, 1000), addr(2, 1000));
    let mut a = endpoint(0, 1, KEY);
    a.add_peer(1, b_addr, 0).unwrap();
    a.add_peer(2, addr(3, 1000), 0).unwrap();
    a.set_link_key(1, k01).unwrap();
    a.set_link_key(2, k02).unwrap();
    // Seat 2 forges "seat 1" with every key it has.
    for key in [KEY, k02, SessionKey([12; 16])] {
        let mut forger = endpoint(1, 1, key);
        forger.add_peer(0, a_addr, 0).unwrap();
        forger.send(0, b"forged").unwrap();
        let mut buf = [0u8; 1500];
        let t = forger.poll_transmit(5, &mut buf).unwrap();
        assert_eq!(
            a.handle_datagram(5, b_addr, &buf[..t.len]),
            Err(DropReason::BadTag)
        );
    }
    // The real seat 1 with K01 gets through.
    let mut b = endpoint(1, 1, KEY);
    b.add_peer(0, a_addr, 0).unwrap();
    b.set_link_key(0, k01).unwrap();
    b.send(0, b"real").unwrap();
    pump(10, &mut b, b_addr, &mut a);
    assert_eq!(drain(&mut a), vec![b"real".to_vec()]);
}
