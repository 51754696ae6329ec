//! Transport benchmarks (S8): packets per second one link can
//! encode + decode + acknowledge on one core (sans-IO, through the endpoint's
//! full validation), the decoder alone, and bytes of overhead per packet
//! carrying one message.
//!
//! `cargo bench --bench transport` (add `-- --quick` for a short run). Timing
//! figures live here, never in pass/fail tests: these machines are noisy.

use std::hint::black_box;
use std::net::SocketAddr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rungs_core::link::{Endpoint, EndpointConfig, LinkConfig};
use rungs_core::wire::packet::{decode, verify_tag, OVERHEAD_ONE_MESSAGE};
use rungs_core::wire::{SessionKey, MAX_PACKET_BYTES};

const KEY: SessionKey = SessionKey(*b"benchmark-key-01");

fn addr(seat: u8) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 9000 + u16::from(seat)))
}

fn endpoint(seat: u8, peer: u8) -> Endpoint {
    let mut e = Endpoint::new(EndpointConfig {
        session_id: 1,
        key: KEY,
        local_seat: seat,
        // An ack packet for every data packet: the round trip this bench
        // has always measured (in a game the acks ride on turns instead).
        link: LinkConfig {
            max_ack_delay_us: 0,
            ..LinkConfig::default()
        },
    })
    .unwrap();
    e.add_peer(peer, addr(peer), 0).unwrap();
    e
}

/// A lockstep order packet's worth of payload.
const PAYLOAD: [u8; 40] = [0x5A; 40];

/// One round: seat 0 sends a message in a packet, seat 1 validates it,
/// delivers the message and sends the ack packet, seat 0 validates the ack
/// and retires the message. Returns the data packet's length.
fn round(a: &mut Endpoint, b: &mut Endpoint, now: u64, buf: &mut [u8]) -> usize {
    a.send(1, &PAYLOAD).unwrap();
    let t = a.poll_transmit(now, buf).unwrap();
    let data_len = t.len;
    b.handle_datagram(now, addr(0), &buf[..t.len]).unwrap();
    black_box(b.recv().unwrap());
    let t = b.poll_transmit(now, buf).unwrap();
    a.handle_datagram(now, addr(1), &buf[..t.len]).unwrap();
    data_len
}

fn link_round_trip(c: &mut Criterion) {
    let mut a = endpoint(0, 1);
    let mut b = endpoint(1, 0);
    let mut buf = [0u8; MAX_PACKET_BYTES];
    // Warm up so both sides carry ack blocks, then report the overhead.
    let mut now = 0u64;
    for _ in 0..10 {
        now += 100;
        round(&mut a, &mut b, now, &mut buf);
    }
    let len = round(&mut a, &mut b, now + 100, &mut buf);
    println!(
        "overhead per packet with one message: {} bytes (packet {} bytes, payload {} bytes; \
         constant OVERHEAD_ONE_MESSAGE = {})",
        len - PAYLOAD.len(),
        len,
        PAYLOAD.len(),
        OVERHEAD_ONE_MESSAGE
    );
    assert_eq!(len - PAYLOAD.len(), OVERHEAD_ONE_MESSAGE);

    let mut group = c.benchmark_group("link");
    // One element = one data packet encoded, validated, delivered and acked
    // (the ack packet's encoding and validation included).
    group.throughput(Throughput::Elements(1));
    group.bench_function("send_encode_decode_ack", |bench| {
        bench.iter(|| {
            now += 100;
            round(&mut a, &mut b, now, &mut buf)
        })
    });
    group.finish();
    let stats = a.link(1).unwrap().stats(now);
    assert_eq!(stats.messages_in_flight, 0);
}

fn decoder(c: &mut Criterion) {
    let mut a = endpoint(0, 1);
    let mut b = endpoint(1, 0);
    let mut buf = [0u8; MAX_PACKET_BYTES];
    round(&mut a, &mut b, 1, &mut buf);
    a.send(1, &PAYLOAD).unwrap();
    let t = a.poll_transmit(2, &mut buf).unwrap();
    let packet = buf[..t.len].to_vec();
    let mut group = c.benchmark_group("packet");
    group.throughput(Throughput::Elements(1));
    group.bench_function("verify_tag_and_decode", |bench| {
        bench.iter(|| {
            let bytes = black_box(&packet[..]);
            assert!(verify_tag(bytes, &KEY, 1));
            decode(bytes).unwrap().messages().count()
        })
    });
    group.finish();
}

criterion_group!(benches, link_round_trip, decoder);
criterion_main!(benches);
