//! Deterministic mutation fuzzing of the packet decoder and the endpoint /
//! link receive path (S8: no input can make the library panic, allocate
//! without bound, or write outside a caller's buffer).
//!
//! cargo-fuzz needs a nightly toolchain; this loop runs on stable inside the
//! normal test command instead. It mutates a corpus of genuine datagrams
//! (bit flips, byte overwrites, boundary values, insertions, deletions,
//! truncation, splices) with a seeded SplitMix64, so every run is the same
//! run. Half the inputs are re-signed with the session key after mutation,
//! so they pass the tag and reach the link's logic (replay window, ack
//! handling, message-number widening, flow control), as a peer holding the
//! key could send them.
//!
//! Input counts: `RUNGS_FUZZ_ITERATIONS` if set; otherwise 5,000,000 per
//! target in release builds and 1,000,000 in debug builds (about ten seconds
//! in all on one core). Run `cargo test --release --test transport_fuzz -- --nocapture`
//! for the full count and the execs/second figure.

use std::net::SocketAddr;
use std::time::Instant;

use rungs_core::link::{Endpoint, EndpointConfig, LinkConfig};
use rungs_sim::SplitMix64;

use crate::common_fuzz;
use common_fuzz::{iterations, report, Format};
use rungs_core::wire::packet::{decode, write_tag, MIN_PACKET_BYTES};
use rungs_core::wire::{SessionKey, MAX_MESSAGE_BYTES, MAX_PACKET_BYTES};

const KEY: SessionKey = SessionKey(*b"fuzzing-key-0001");
const SESSION: u32 = 0xF022;

fn addr(seat: u8) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 6000 + u16::from(seat)))
}

fn endpoint(seat: u8, peers: &[u8], link: LinkConfig) -> Endpoint {
    let mut e = Endpoint::new(EndpointConfig {
        session_id: SESSION,
        key: KEY,
        local_seat: seat,
        link,
    })
    .unwrap();
    for &p in peers {
        e.add_peer(p, addr(p), 0).unwrap();
    }
    e
}

/// Genuine datagrams for seat 1: from seat 0 (and seat 2), with acks,
/// pings, small and large messages, retransmissions.
fn corpus() -> Vec<Vec<u8>> {
    let mut a = endpoint(0, &[1], LinkConfig::default());
    let mut b = endpoint(1, &[0, 2], LinkConfig::default());
    let mut c = endpoint(2, &[1], LinkConfig::default());
    let mut rng = SplitMix64::new(1);
    let mut out = Vec::new();
    let mut buf = [0u8; MAX_PACKET_BYTES];
    for step in 0..400u64 {
        let now = step * 20_000;
        for e in [&mut a, &mut c] {
            if rng.chance_ppm(600_000) {
                let len = match rng.below_or_equal(3) {
                    0 => 0,
                    1 => 1 + rng.below_or_equal(60) as usize,
                    2 => 128 + rng.below_or_equal(200) as usize,
                    _ => MAX_MESSAGE_BYTES,
                };
                let payload: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                let _ = e.send(1, &payload);
            }
            while let Some(t) = e.poll_transmit(now, &mut buf) {
                let datagram = buf[..t.len].to_vec();
                // Deliver most, so acks and retransmissions both appear.
                if rng.chance_ppm(800_000) {
                    let from = addr(e.local_seat());
                    let _ = b.handle_datagram(now + 1, from, &datagram);
                }
                out.push(datagram);
            }
        }
        while b.recv().is_some() {}
        while let Some(t) = b.poll_transmit(now + 1, &mut buf) {
            let to = if t.seat == 0 { &mut a } else { &mut c };
            let _ = to.handle_datagram(now + 2, addr(1), &buf[..t.len]);
        }
    }
    assert!(out.len() > 300, "corpus of {}", out.len());
    out
}

/// What the transport packet format finds interesting (tests/common/fuzz.rs).
const PACKET: Format = Format {
    interesting: &[0x00, 0x01, 0x7F, 0x80, 0x81, 0xFE, 0xFF, 0xB7],
    max_len: 2 * MAX_PACKET_BYTES,
    field: header_field,
};

/// Hit the 16-bit fields of the header and ack block.
fn header_field(rng: &mut SplitMix64, input: &mut [u8], _at: usize) -> bool {
    if input.len() < 20 {
        return false;
    }
    let field = [8usize, 12, 16, 18][rng.below_or_equal(3) as usize];
    let value = rng.next_u64() as u16;
    input[field..field + 2].copy_from_slice(&value.to_le_bytes());
    true
}

fn mutate(rng: &mut SplitMix64, corpus: &[Vec<u8>], input: &mut Vec<u8>) {
    common_fuzz::mutate(rng, corpus, input, &PACKET);
}

#[test]
fn fuzz_packet_decoder() {
    let corpus = corpus();
    let mut rng = SplitMix64::new(0xDEC0DE);
    let count = iterations(1_000_000, 5_000_000);
    let started = Instant::now();
    let mut accepted = 0u64;
    let mut input = Vec::with_capacity(2 * MAX_PACKET_BYTES + 64);
    for _ in 0..count {
        input.clear();
        input.extend_from_slice(&corpus[rng.below_or_equal(corpus.len() as u64 - 1) as usize]);
        mutate(&mut rng, &corpus, &mut input);
        if let Ok(packet) = decode(&input) {
            accepted += 1;
            assert!((MIN_PACKET_BYTES..=MAX_PACKET_BYTES).contains(&input.len()));
            let mut total = 0;
            for message in packet.messages() {
                assert!(message.payload.len() <= MAX_MESSAGE_BYTES);
                total += message.payload.len();
            }
            assert!(total < input.len());
            assert_eq!(packet.messages().count(), packet.message_count());
        }
    }
    report("decoder", count, None, started);
    // The mutations keep some inputs valid, so the deep paths are reached.
    assert!(accepted > count / 20, "only {accepted} structurally valid");
}

#[test]
fn fuzz_endpoint_receive_path() {
    let corpus = corpus();
    let mut rng = SplitMix64::new(0xF00D);
    let count = iterations(1_000_000, 5_000_000);
    let link = LinkConfig {
        receive_capacity: 64,
        ..LinkConfig::default()
    };
    let mut target = endpoint(1, &[0, 2], link);
    let mut peer = endpoint(0, &[1], LinkConfig::default());
    let started = Instant::now();
    let mut buf = [0u8; MAX_PACKET_BYTES];
    let mut input = Vec::with_capacity(2 * MAX_PACKET_BYTES + 64);
    let (mut accepted, mut delivered) = (0u64, 0u64);
    let mut next_pn_seat2 = 0u32;
    for i in 0..count {
        let now = i * 500;
        input.clear();
        input.extend_from_slice(&corpus[rng.below_or_equal(corpus.len() as u64 - 1) as usize]);
        let resign = rng.chance_ppm(500_000);
        // Some re-signed inputs stay unmutated: genuine packets under new
        // numbers, which drive the link's delivery and ack logic forward.
        if !resign || rng.chance_ppm(700_000) {
            mutate(&mut rng, &corpus, &mut input);
        }
        if resign && input.len() >= 28 {
            // As a key holder would: right prefix, a packet number near the
            // window (mostly fresh, sometimes replayed or stale), right tag.
            input[0] = 0xB7;
            input[1] = rungs_core::wire::packet::VERSION;
            input[4..8].copy_from_slice(&SESSION.to_le_bytes());
            input[3] = 2;
            let pn = match rng.below_or_equal(19) {
                0..=14 => next_pn_seat2.wrapping_add(1),
                15..=18 => next_pn_seat2.saturating_sub(rng.below_or_equal(100) as u32),
                _ => u32::from_le_bytes(input[8..12].try_into().unwrap()), // as mutated
            };
            input[8..12].copy_from_slice(&pn.to_le_bytes());
            // Mostly the peer's run (its epoch and nonce) addressed to ours;
            // sometimes another: a restart, or a packet of an earlier run.
            if input.len() >= 28 && rng.chance_ppm(900_000) {
                let link = target.link(2);
                let epoch = link.and_then(|l| l.peer_epoch()).unwrap_or(1);
                let nonce = link.and_then(|l| l.peer_nonce()).unwrap_or(1);
                input[12..16].copy_from_slice(&epoch.to_le_bytes());
                input[16..20].copy_from_slice(&nonce.to_le_bytes());
                let ours = target.connection_nonce();
                input[20..24].copy_from_slice(&ours.to_le_bytes());
            }
            input.truncate(MAX_PACKET_BYTES);
            write_tag(&mut input, &KEY, 1);
        }
        let source = if rng.chance_ppm(950_000) {
            addr(input.get(3).copied().unwrap_or(0))
        } else {
            addr(9)
        };
        if let Ok(seat) = target.handle_datagram(now, source, &input) {
            accepted += 1;
            if seat == 2 {
                // Follow the window wherever an accepted packet moved it.
                let pn = u32::from_le_bytes(input[8..12].try_into().unwrap());
                next_pn_seat2 = next_pn_seat2.max(pn);
            }
        }
        // Keep the state machine moving: the engine reads, timers fire,
        // packets go out, and a genuine peer answers now and then.
        while let Some((_, message)) = target.recv() {
            assert!(message.len() <= MAX_MESSAGE_BYTES);
            delivered += 1;
        }
        if i % 16 == 0 {
            let _ = target.send(0, &input[..input.len().min(64)]);
            while let Some(t) = target.poll_transmit(now, &mut buf) {
                assert!(t.len <= MAX_PACKET_BYTES);
                if t.seat == 0 {
                    let _ = peer.handle_datagram(now, addr(1), &buf[..t.len]);
                }
            }
            while peer.recv().is_some() {}
            let _ = peer.send(1, &input[..input.len().min(32)]);
            while let Some(t) = peer.poll_transmit(now, &mut buf) {
                let _ = target.handle_datagram(now, addr(0), &buf[..t.len]);
            }
        }
        for seat in [0, 2] {
            let link = target.link(seat).unwrap();
            assert!(link.ready_messages() <= 64, "receive capacity holds");
        }
    }
    report("endpoint receive path", count, None, started);
    let drops = target.total_drops();
    eprintln!(
        "  accepted {accepted}, delivered {delivered}, dropped {} ({:?})",
        drops.total(),
        rungs_core::link::DropReason::ALL
            .iter()
            .map(|r| (r.name(), drops.get(*r)))
            .collect::<Vec<_>>()
    );
    // Coverage, not safety: enough inputs got all the way into the link.
    // (The share falls in long runs as mutated message numbers leave gaps
    // that fill the receive buffer; 5 M inputs accept about 5.6 %.)
    assert!(
        accepted > count / 100,
        "the deep path was reached: {accepted}"
    );
    assert!(delivered > 0);
    for reason in [
        rungs_core::link::DropReason::BadTag,
        rungs_core::link::DropReason::Malformed,
        rungs_core::link::DropReason::Replayed,
        rungs_core::link::DropReason::SpoofedAddress,
    ] {
        assert!(drops.get(reason) > 0, "{} never hit", reason.name());
    }
}
