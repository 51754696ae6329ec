//! Connection nonces (S8): a number per run of a program, so a restart is
//! told from the run before it whatever epoch the program passes.
//!
//! The core reads no clock and no process state: the entropy that makes a
//! run's nonces differ from the last run's comes from the edge, once per
//! process, through [`seed_connection_nonces`] (`rungs-net`'s
//! `seed_connection_nonces` does it from the wall clock and the process id;
//! the C library calls it on its first call). Unseeded, the nonces are a
//! fixed sequence: what a simulator wants, and harmless to a program that
//! gives every run a newer epoch.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::rng::SplitMix64;

/// The process's nonce seed (0 until the edge gives one).
static SEED: AtomicU64 = AtomicU64::new(0);
/// Nonces drawn by this process so far: two endpoints of one process never
/// share one.
static DRAWN: AtomicU64 = AtomicU64::new(0);

/// Give this process's connection nonces their entropy: a seed that
/// differs from run to run and cannot be guessed from outside. Call it once,
/// before the first endpoint, link or session is made; a later call changes
/// only the nonces drawn after it.
pub fn seed_connection_nonces(seed: u64) {
    SEED.store(seed, Ordering::Relaxed);
}

/// A fresh connection nonce, never 0: the process's seed and a per-process
/// count, mixed. Not secret (packets carry it in the clear), only different
/// for every run (once seeded) and for every draw within one.
pub fn connection_nonce() -> u32 {
    let count = DRAWN.fetch_add(1, Ordering::Relaxed);
    let mut rng =
        SplitMix64::new(SEED.load(Ordering::Relaxed) ^ count.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    loop {
        let nonce = rng.next_u64() as u32;
        if nonce != 0 {
            return nonce;
        }
    }
}
