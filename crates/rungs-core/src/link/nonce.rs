//! Connection nonces (S8): a random number per run of a program, so a
//! restart is told from the run before it whatever epoch the program
//! passes.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::rng::SplitMix64;

/// Nonces drawn by this process so far: two endpoints of one process never
/// share one.
static DRAWN: AtomicU64 = AtomicU64::new(0);

/// A fresh connection nonce, never 0: the wall clock's nanoseconds, the
/// process id, an address of this process and a per-process count, mixed.
/// Not secret (packets carry it in the clear), only different for every run
/// and not guessable before it, which is all a nonce needs.
pub fn connection_nonce() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let local = 0u8;
    let address = &local as *const u8 as u64;
    let count = DRAWN.fetch_add(1, Ordering::Relaxed);
    let mut rng = SplitMix64::new(
        nanos
            ^ u64::from(std::process::id()).rotate_left(32)
            ^ address.rotate_left(17)
            ^ count.wrapping_mul(0x9E37_79B9_7F4A_7C15),
    );
    loop {
        let nonce = rng.next_u64() as u32;
        if nonce != 0 {
            return nonce;
        }
    }
}
