//! Deterministic mutation fuzzing of the relay protocol's decoders (S10,
//! `src/wire/relay.rs`): no input may make them panic, and every input they
//! accept must be canonical — writing the decoded value back gives the same
//! bytes — so one meaning has one byte string.
//!
//! Like `transport_fuzz.rs`: a seeded SplitMix64 mutates a corpus of genuine
//! datagrams and messages (bit flips, byte overwrites, boundary values,
//! insertions, deletions, truncation, splices). Input counts:
//! `RUNGS_FUZZ_ITERATIONS` if set, otherwise 10,000,000 per target in release
//! builds and 2,000,000 in debug builds. Run
//! `cargo test --release --test relay_fuzz -- --nocapture` for the
//! execs/second figure.

use std::time::Instant;

use rungs::sim::SplitMix64;
use rungs::wire::relay::*;

fn iterations() -> u64 {
    if let Ok(text) = std::env::var("RUNGS_FUZZ_ITERATIONS") {
        return text.parse().expect("RUNGS_FUZZ_ITERATIONS is a number");
    }
    if cfg!(debug_assertions) {
        2_000_000
    } else {
        10_000_000
    }
}

const SECRET: [u8; 16] = *b"fuzz-link-secret";

fn corpus() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; MAX_MESSAGE_BYTES];
    let len = write_hello(
        &Hello {
            nonce: 0xAABB_CCDD_0011_2233,
            have_horizon: 77,
            ticket: [3; TICKET_BYTES],
        },
        &SECRET,
        &mut buf,
    )
    .unwrap();
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
    out.push(ClientMessage::Quit { sequence: 8 }.to_vec());
    out.push(ClientMessage::ResyncRequest { horizon: 12 }.to_vec());
    out
}

fn mutate(rng: &mut SplitMix64, corpus: &[Vec<u8>], input: &mut Vec<u8>) {
    const INTERESTING: [u8; 10] = [0x00, 0x01, 0x02, 0x7F, 0x80, 0xFE, 0xFF, 0xB8, 0x03, 0x11];
    for _ in 0..=rng.below_or_equal(3) {
        let len = input.len() as u64;
        let at = if len == 0 {
            0
        } else {
            rng.below_or_equal(len - 1) as usize
        };
        match rng.below_or_equal(9) {
            0 | 1 if len > 0 => input[at] ^= 1 << rng.below_or_equal(7),
            2 if len > 0 => input[at] = rng.next_u64() as u8,
            3 if len > 0 => input[at] = INTERESTING[rng.below_or_equal(9) as usize],
            4 => {
                let n = 1 + rng.below_or_equal(8) as usize;
                let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                input.splice(at..at, bytes);
            }
            5 if len > 0 => {
                let end = (at + 1 + rng.below_or_equal(8) as usize).min(input.len());
                input.drain(at..end);
            }
            6 => input.truncate(rng.below_or_equal(len) as usize),
            7 => {
                let other = &corpus[rng.below_or_equal(corpus.len() as u64 - 1) as usize];
                let from = rng.below_or_equal(other.len() as u64) as usize;
                input.truncate(at);
                input.extend_from_slice(&other[from..]);
            }
            8 if len >= 4 => {
                // Lengths, counts and ticks are 16/32-bit fields.
                let at = at.min(input.len() - 2);
                let value = [0u16, 1, 0x7FFF, 0xFFFF, 512, 513][rng.below_or_equal(5) as usize];
                input[at..at + 2].copy_from_slice(&value.to_le_bytes());
            }
            _ => {
                let n = rng.below_or_equal(64) as usize;
                input.extend((0..n).map(|_| rng.next_u64() as u8));
            }
        }
    }
    input.truncate(2 * MAX_MESSAGE_BYTES);
}

fn report(name: &str, count: u64, accepted: u64, started: Instant) {
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "{name}: {count} inputs in {seconds:.2} s, {:.0} execs/s, {accepted} accepted, 0 crashes ({} build)",
        count as f64 / seconds,
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
}

#[test]
fn fuzz_relay_decoders_accept_only_canonical_input() {
    let corpus = corpus();
    let mut rng = SplitMix64::new(0x5E1A7);
    let count = iterations();
    let started = Instant::now();
    let mut accepted = 0u64;
    let mut input = Vec::with_capacity(2 * MAX_MESSAGE_BYTES + 64);
    let mut out = [0u8; 2 * MAX_MESSAGE_BYTES];
    for _ in 0..count {
        input.clear();
        input.extend_from_slice(&corpus[rng.below_or_equal(corpus.len() as u64 - 1) as usize]);
        mutate(&mut rng, &corpus, &mut input);

        if let Ok(m) = read_server_message(&input) {
            accepted += 1;
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
            accepted += 1;
            let len = m.write(&mut out).expect("a decoded message re-encodes");
            assert_eq!(&out[..len], &input[..], "client message not canonical");
        }
        if let Ok(h) = read_hello(&input) {
            accepted += 1;
            let len = write_hello(&h, &SECRET, &mut out).unwrap();
            assert_eq!(&out[..len - 8], &input[..len - 8], "hello not canonical");
            // A mutated Hello verifies only when nothing the tag covers changed.
            assert_eq!(verify_hello_tag(&input, &SECRET), out[..len] == input[..]);
        }
        if let Ok(r) = read_reject(&input) {
            accepted += 1;
            let len = write_reject(&r, &mut out).unwrap();
            assert_eq!(&out[..len], &input[..], "reject not canonical");
        }
    }
    report("relay decoders", count, accepted, started);
    assert!(accepted > count / 50, "only {accepted} accepted");
}
