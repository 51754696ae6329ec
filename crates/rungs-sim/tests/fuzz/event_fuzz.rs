//! Deterministic mutation fuzzing of the event payload decoders (S7,
//! `wire::events`): every TIMING and NETWORK_REPORT layout, fed mutations of
//! genuine payloads of every layout, either refuses the bytes as malformed
//! or decodes a value it encodes back to the very same bytes — never a
//! panic. `tests/payload_properties.rs` checks the same with proptest's
//! strategies; this reaches the accepting paths far more often, the way
//! `transport_fuzz.rs` and `turn_fuzz.rs` do for packets and turns.
//!
//! Input counts: `RUNGS_FUZZ_ITERATIONS` if set (per decoder); otherwise
//! 2,000,000 per decoder in release builds, a tenth of that in debug
//! builds. Run `cargo test --release --test event_fuzz -- --nocapture` for
//! the figures.

use std::time::Instant;

use rungs_core::report::{LookAheadNeeds, Report, ReportDetail};
use rungs_core::timing::{Timing, TimingEvent};
use rungs_core::wire::{ReportLayout, TimingLayout, TS_EVENT_DATA_LEN};
use rungs_core::Error;
use rungs_sim::SplitMix64;

use crate::common_fuzz;
use common_fuzz::{iterations, report, Format};

const TIMING_LAYOUTS: [TimingLayout; 4] = [
    TimingLayout::TiberianSun { fog_bias: 0 },
    TimingLayout::TiberianSun { fog_bias: 10 },
    TimingLayout::RedAlert { send_period: 1 },
    TimingLayout::RedAlert { send_period: 3 },
];

const REPORT_LAYOUTS: [ReportLayout; 4] = [
    ReportLayout::Compact,
    ReportLayout::Extended,
    ReportLayout::Detailed,
    ReportLayout::Needs,
];

/// Genuine payloads of every layout, from values across their ranges.
fn corpus() -> Vec<Vec<u8>> {
    let mut rng = SplitMix64::new(0xE7);
    let mut out = Vec::new();
    let mut buf = [0u8; TS_EVENT_DATA_LEN];
    for _ in 0..200 {
        let send_period = 1 + rng.below_or_equal(9) as u8;
        let multiple = 1 + rng.below_or_equal(u64::from(250 / send_period) - 1) as u8;
        let event = TimingEvent {
            target: Timing::new(send_period, send_period * multiple).unwrap(),
            fps: 1 + rng.below_or_equal(254) as u8,
        };
        for layout in TIMING_LAYOUTS {
            if let Ok(len) = layout.encode(&event, &mut buf) {
                out.push(buf[..len].to_vec());
            }
        }
        let worst = (rng.below_or_equal(9) > 0).then(|| rng.below_or_equal(2_000) as u32);
        let below = |rng: &mut SplitMix64| worst.map(|w| rng.below_or_equal(u64::from(w)) as u32);
        let (a, b) = (below(&mut rng), below(&mut rng));
        let frames = rng.below_or_equal(600) as u32;
        let stalled = rng.below_or_equal(u64::from(frames)) as u32;
        let most = 1 + rng.below_or_equal(40) as u8;
        let reference = 1 + rng.below_or_equal(40) as u8;
        let mut above = [0u16; 4];
        for (k, count) in above.iter_mut().enumerate() {
            let level = i32::from(reference) - k as i32;
            *count = if i32::from(most) <= level {
                0
            } else {
                1 + rng.below_or_equal(300) as u16
            };
        }
        above.sort_unstable();
        let report = Report {
            process_us: rng.below_or_equal(60_000) as u32,
            max_wait_ms: rng.below_or_equal(3_000) as u32,
            worst_rtt_ms: worst,
            detail: Some(ReportDetail {
                median_rtt_ms: a.min(b),
                p90_rtt_ms: a.max(b),
                latest_rtt_ms: below(&mut rng),
                frames,
                stalled_frames: stalled,
                stall_ms: if stalled == 0 {
                    0
                } else {
                    rng.below_or_equal(5_000) as u32
                },
                waited_for: (stalled > 0).then(|| rng.below_or_equal(15) as u8),
                needs: (rng.below_or_equal(3) > 0).then_some(LookAheadNeeds {
                    reference,
                    most,
                    above,
                }),
            }),
        };
        for layout in REPORT_LAYOUTS {
            if let Ok(len) = layout.encode(&report, &mut buf) {
                out.push(buf[..len].to_vec());
            }
        }
    }
    out
}

/// What the payload layouts find interesting: version bytes, "none" values.
const EVENT: Format = Format {
    interesting: &[0x00, 0x01, 0x02, 0x03, 0x0A, 0x7F, 0x80, 0xFE, 0xFF],
    max_len: 48,
    field: u16_field,
};

/// A u16 field near a boundary (frame rates, look-aheads, milliseconds).
fn u16_field(rng: &mut SplitMix64, input: &mut [u8], _at: usize) -> bool {
    common_fuzz::plant_boundary(rng, input, 2, 2)
}

/// Fuzz one decoder: `decode` either refuses the bytes as malformed or
/// gives a value `encode` turns back into the same bytes. Returns how many
/// inputs decoded.
fn fuzz<T>(
    name: &str,
    seed: u64,
    decode: impl Fn(&[u8]) -> rungs_core::Result<T>,
    encode: impl Fn(&T, &mut [u8]) -> rungs_core::Result<usize>,
) -> u64 {
    let corpus = corpus();
    let count = iterations(200_000, 2_000_000);
    let mut rng = SplitMix64::new(seed);
    let mut input = Vec::with_capacity(64);
    let mut again = [0u8; TS_EVENT_DATA_LEN];
    let mut decoded = 0u64;
    let started = Instant::now();
    for _ in 0..count {
        input.clear();
        input.extend_from_slice(&corpus[rng.below_or_equal(corpus.len() as u64 - 1) as usize]);
        common_fuzz::mutate(&mut rng, &corpus, &mut input, &EVENT);
        match decode(&input) {
            Ok(value) => {
                decoded += 1;
                let len = encode(&value, &mut again).expect("a decoded value encodes");
                assert_eq!(&again[..len], &input[..], "{name}: not canonical");
            }
            Err(e) => assert!(matches!(e, Error::Malformed(_)), "{name}: {e:?}"),
        }
    }
    report(name, count, Some(decoded), started);
    decoded
}

#[test]
fn fuzz_timing_decoders() {
    for (i, layout) in TIMING_LAYOUTS.into_iter().enumerate() {
        let name = format!("TIMING decoder {layout:?}");
        let decoded = fuzz(
            &name,
            0x71 + i as u64,
            |bytes| layout.decode(bytes),
            |event, buf| layout.encode(event, buf),
        );
        assert!(decoded > 0, "{name}: mutations reach the accepting path");
    }
}

#[test]
fn fuzz_report_decoders() {
    for (i, layout) in REPORT_LAYOUTS.into_iter().enumerate() {
        let name = format!("NETWORK_REPORT decoder {layout:?}");
        let decoded = fuzz(
            &name,
            0x81 + i as u64,
            |bytes| layout.decode(bytes),
            |report, buf| layout.encode(report, buf),
        );
        assert!(decoded > 0, "{name}: mutations reach the accepting path");
    }
}
