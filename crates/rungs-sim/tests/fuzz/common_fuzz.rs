//! What the deterministic fuzz tests (transport packets, lockstep turns,
//! relay messages) share: how many inputs to run, how a run reports its
//! figures, and the byte mutator — one set of generic mutations, with what
//! each format finds interesting (byte values and a way to hit its wider
//! fields) given by the caller.

use std::time::Instant;

use rungs_sim::SplitMix64;

/// Inputs for one fuzz target: `RUNGS_FUZZ_ITERATIONS` when set, else
/// `debug` in a debug build and `release` in a release build.
pub fn iterations(debug: u64, release: u64) -> u64 {
    if let Ok(text) = std::env::var("RUNGS_FUZZ_ITERATIONS") {
        return text.parse().expect("RUNGS_FUZZ_ITERATIONS is a number");
    }
    if cfg!(debug_assertions) {
        debug
    } else {
        release
    }
}

/// The figures of one fuzz run on stderr: inputs, rate, how many were
/// accepted where the target counts that, and the build.
pub fn report(name: &str, count: u64, accepted: Option<u64>, started: Instant) {
    let seconds = started.elapsed().as_secs_f64().max(1e-9);
    let accepted = accepted.map_or(String::new(), |n| format!(", {n} accepted"));
    eprintln!(
        "{name}: {count} inputs in {seconds:.2} s, {:.0} execs/s{accepted}, 0 crashes ({} build)",
        count as f64 / seconds,
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
}

/// What one wire format finds interesting.
pub struct Format {
    /// Byte values worth planting (bounds, magic numbers, limits).
    pub interesting: &'static [u8],
    /// Inputs are kept at most this long, so the corpus cannot grow without bound.
    pub max_len: usize,
    /// Overwrite one of the format's wider fields near `at`; false when the
    /// input is too short for one (another mutation is made instead).
    pub field: fn(&mut SplitMix64, &mut [u8], usize) -> bool,
}

/// Plant a little-endian field of `width` bytes (2 or 4) at a random place
/// of `input`, valued near a boundary: 0, all ones, a small number or any;
/// false when `input` is shorter than `min_len`.
#[allow(dead_code)] // the packet and relay fuzzers aim at fixed fields instead
pub fn plant_boundary(
    rng: &mut SplitMix64,
    input: &mut [u8],
    width: usize,
    min_len: usize,
) -> bool {
    if input.len() < min_len.max(width) {
        return false;
    }
    let i = rng.below_or_equal((input.len() - width) as u64) as usize;
    let value = match rng.below_or_equal(3) {
        0 => 0u64,
        1 => u64::MAX,
        2 => rng.below_or_equal(300),
        _ => rng.next_u64(),
    };
    input[i..i + width].copy_from_slice(&value.to_le_bytes()[..width]);
    true
}

/// Apply 1–4 random mutations to `input`, splicing from `corpus` at times.
pub fn mutate(rng: &mut SplitMix64, corpus: &[Vec<u8>], input: &mut Vec<u8>, format: &Format) {
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
            3 if len > 0 => {
                let pick = rng.below_or_equal(format.interesting.len() as u64 - 1) as usize;
                input[at] = format.interesting[pick];
            }
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
            8 if (format.field)(rng, input, at) => {}
            _ => {
                let n = rng.below_or_equal(64) as usize;
                input.extend((0..n).map(|_| rng.next_u64() as u8));
            }
        }
        input.truncate(format.max_len);
    }
}
