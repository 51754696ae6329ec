//! Deterministic mutation fuzzing of the turn protocol (`wire::turn`) and of
//! a lockstep session's receive path (S4.7, S8: nothing a key holder sends
//! can panic a session, grow it without bound, or be obeyed without
//! authority). Like `transport_fuzz.rs`, on stable inside the test command.
//!
//! Target 1 mutates a corpus of genuine messages of every kind (turn parts,
//! pings, pongs, votes, relays, relay requests, drop decisions) and decodes
//! them. Target 2
//! sends mutated and freshly forged messages — plausible turns for the send
//! frames the session expects, removals of others, timing events from a
//! non-master, relays, votes — over an authenticated link into a running
//! session, which keeps advancing frames and drops a silent player midway.
//!
//! Input counts: `RUNGS_FUZZ_ITERATIONS` if set; otherwise 2,000,000
//! (decoder) and 200,000 (session) in release builds, a fifth of that in
//! debug builds. Run `cargo test --release --test turn_fuzz -- --nocapture`
//! for the figures.

use std::net::SocketAddr;
use std::time::Instant;

use rungs_core::link::{Endpoint, EndpointConfig, LinkConfig};
use rungs_core::report::{Report, ReportDetail};
use rungs_core::session::{LockstepConfig, LockstepSession};
use rungs_sim::SplitMix64;

use crate::common_fuzz;
use common_fuzz::{iterations, report, Format};
use rungs_core::timing::{MachineConfig, PolicyKind, Timing, TimingEvent};
use rungs_core::wire::turn::{self, Item, Record, MAX_TURN_PARTS};
use rungs_core::wire::SessionKey;

const KEY: SessionKey = SessionKey(*b"turn-fuzzing-key");
const SESSION: u32 = 0x7E57;

fn random_item(rng: &mut SplitMix64, seats: u8) -> Item {
    match rng.below_or_equal(4) {
        0 | 1 => {
            let len = rng.below_or_equal(40) as usize;
            Item::Command((0..len).map(|_| rng.next_u64() as u8).collect())
        }
        2 => Item::Removal(rng.below_or_equal(u64::from(seats)) as u8),
        3 => Item::Timing(TimingEvent {
            target: Timing::new(10, 250).unwrap(),
            fps: 1 + rng.below_or_equal(59) as u8,
        }),
        _ => {
            let worst_rtt_ms = Some(rng.below_or_equal(900) as u32);
            Item::Report(Report {
                process_us: rng.below_or_equal(50_000) as u32,
                max_wait_ms: rng.below_or_equal(500) as u32,
                worst_rtt_ms,
                detail: Some(ReportDetail::from_worst(worst_rtt_ms)),
            })
        }
    }
}

/// Genuine messages of every kind.
fn corpus() -> Vec<Vec<u8>> {
    let mut rng = SplitMix64::new(3);
    let mut out = Vec::new();
    for n in 0..200u32 {
        let items: Vec<Item> = (0..rng.below_or_equal(6))
            .map(|_| random_item(&mut rng, 4))
            .collect();
        let records = [
            Record::Checksum {
                frame: n * 64,
                value: rng.next_u64(),
            },
            Record::Anchor {
                frame: n,
                start_us: rng.next_u64() as i64,
            },
        ];
        let max = if n % 5 == 0 { 120 } else { 1024 };
        if let Ok(parts) = turn::encode_turn(n, n + 1 + (n % 9), &items, &records, max) {
            for part in parts {
                out.push(turn::encode_relay((n % 4) as u8, &part));
                out.push(part);
            }
        }
        out.push(turn::encode_drop_vote(
            (n % 4) as u8,
            (n % 3 != 0).then_some(n),
            1 << (n % 4),
        ));
        out.push(turn::encode_relay_request(
            (n % 4) as u8,
            (n % 2 == 0).then_some(n),
        ));
        out.push(turn::encode_drop_decided(
            (n % 4) as u8,
            (n % 3 != 1).then_some(n),
        ));
        out.push(turn::encode_ping(rng.next_u64() as i64).to_vec());
        out.push(turn::encode_pong(1, 2, 3).to_vec());
    }
    out
}

/// What the turn layout finds interesting (tests/common/fuzz.rs).
const TURN: Format = Format {
    interesting: &[0x00, 0x01, 0x02, 0x7F, 0x80, 0xFE, 0xFF, MAX_TURN_PARTS],
    max_len: 1100,
    field: u32_field,
};

/// A u32 field near a boundary (frames, tags, counts).
fn u32_field(rng: &mut SplitMix64, input: &mut [u8], _at: usize) -> bool {
    // Past the 12-byte header: the fields of the messages.
    common_fuzz::plant_boundary(rng, input, 4, 13)
}

fn mutate(rng: &mut SplitMix64, corpus: &[Vec<u8>], input: &mut Vec<u8>) {
    common_fuzz::mutate(rng, corpus, input, &TURN);
}

#[test]
fn fuzz_turn_decoder() {
    let corpus = corpus();
    let count = iterations(400_000, 2_000_000);
    let mut rng = SplitMix64::new(0xD0);
    let mut input = Vec::with_capacity(1200);
    let mut decoded = 0u64;
    let started = Instant::now();
    for _ in 0..count {
        input.clear();
        input.extend_from_slice(&corpus[rng.below_or_equal(corpus.len() as u64 - 1) as usize]);
        mutate(&mut rng, &corpus, &mut input);
        if let Ok(message) = turn::decode(&input) {
            decoded += 1;
            // Whatever decodes is within the layout's bounds.
            if let turn::Message::Turn(part) | turn::Message::Relay { part, .. } = message {
                assert!(part.index < part.count && part.count <= MAX_TURN_PARTS);
                assert!(part.tag > part.send_frame);
                assert!(part.items.len() + part.records.len() <= input.len() / 3);
            }
        }
    }
    report("turn decoder", count, None, started);
    eprintln!("  {decoded} inputs decoded");
    assert!(
        decoded > count / 50,
        "mutations still reach the item decoders"
    );
}

fn addr(seat: u8) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7000 + u16::from(seat)))
}

#[test]
fn fuzz_session_receive_path() {
    let corpus = corpus();
    let count = iterations(40_000, 200_000);
    let mut rng = SplitMix64::new(0x5E55);
    // The session under test is seat 0, the master, of three; seat 1 is the
    // attacker (it holds its link key) and also sends its genuine turns, so
    // frames keep running; seat 2 never speaks and is dropped at once (the
    // attacker's vote agrees).
    let config = LockstepConfig {
        machine: MachineConfig {
            speed_fps: 30,
            human_seats: vec![true; 3],
            local_seat: Some(0),
            policy: PolicyKind::Adaptive,
        },
        session_id: SESSION,
        key: KEY,
        link_keys: Vec::new(),
        epoch: 1,
        link: LinkConfig::default(),
        checksum_interval: 64,
        topology: rungs_core::session::Topology::PeerToPeer,
        manual_drops: false,
    };
    let mut session = LockstepSession::new(&config, 0).unwrap();
    session.add_peer(1, addr(1), 0).unwrap();
    session.add_peer(2, addr(2), 0).unwrap();
    let mut attacker = Endpoint::new(EndpointConfig {
        session_id: SESSION,
        key: KEY,
        local_seat: 1,
        link: LinkConfig::default(),
    })
    .unwrap();
    attacker.add_peer(0, addr(0), 0).unwrap();
    let mut buf = [0u8; 1500];
    let mut input = Vec::with_capacity(1200);
    let mut max_held = 0usize;
    let mut ran = 0u64;
    let started = Instant::now();
    let mut now = 1_000u64;
    let mut genuine_through: Option<u32> = None;
    session.drop_player(2).unwrap();
    attacker
        .send(0, &turn::encode_drop_vote(2, None, 1 << 2))
        .unwrap();
    for i in 0..count {
        // Seat 1's genuine turn for every send frame the session has run.
        if let Some((frame, tag)) = session.tamper().last_turn() {
            if genuine_through.map_or(true, |g| frame > g) {
                genuine_through = Some(frame);
                if let Ok(parts) = turn::encode_turn(frame, tag, &[], &[], 1024) {
                    for part in parts {
                        let _ = attacker.send(0, &part);
                    }
                }
            }
        }
        now += 2_000;
        input.clear();
        if rng.chance_ppm(500_000) {
            // A plausible turn: the send frame the session expects next from
            // seat 1 (or near it), items of every kind.
            let base = session.frame().unwrap_or(0);
            let send_frame = base.saturating_sub(2) + rng.below_or_equal(6) as u32;
            let items: Vec<Item> = (0..rng.below_or_equal(3))
                .map(|_| random_item(&mut rng, 3))
                .collect();
            let tag = send_frame + 1 + rng.below_or_equal(8) as u32;
            if let Ok(parts) = turn::encode_turn(send_frame, tag, &items, &[], 1024) {
                input.extend_from_slice(&parts[0]);
            }
            if rng.chance_ppm(300_000) {
                let part = std::mem::take(&mut input);
                input = turn::encode_relay(2, &part);
            }
        } else {
            input.extend_from_slice(&corpus[rng.below_or_equal(corpus.len() as u64 - 1) as usize]);
            mutate(&mut rng, &corpus, &mut input);
        }
        input.truncate(1024);
        if attacker.send(0, &input).is_ok() {
            while let Some(t) = attacker.poll_transmit(now, &mut buf) {
                session.handle_datagram(now, addr(1), &buf[..t.len]);
            }
        }
        if i % 4 == 0 {
            session.handle_timeout(now);
            if let Ok(rungs_core::session::Advance::Ran { .. }) = session.advance(now) {
                ran += 1;
            }
            while let Some(t) = session.poll_transmit(now, &mut buf) {
                if t.seat == 1 {
                    let _ = attacker.handle_datagram(now, addr(0), &buf[..t.len]);
                }
            }
            while attacker.recv().is_some() {}
            while session.poll_event().is_some() {}
        }
        max_held = max_held.max(session.held_bytes());
        assert!(max_held < 16 << 20, "{max_held} bytes held");
    }
    report("session receive path", count, None, started);
    let stats = session.stats();
    eprintln!(
        "  {ran} frames run, {} malformed, {} refused messages, {} refused items, {} KB held at most",
        stats.malformed_messages,
        stats.refused_messages,
        stats.refused_items,
        max_held / 1024
    );
    assert!(stats.malformed_messages > 0 && stats.refused_messages > 0);
    assert!(
        ran > count / 40,
        "the forged input did not wedge the game: {ran} frames"
    );
}
