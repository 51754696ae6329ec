//! Entropy for the edge: a seed that differs per process and cannot be
//! guessed from outside. The core takes its seeds as arguments; only the
//! drivers and the C library read the wall clock and the process id.

/// A seed for this process's connection nonces and a host's lobby secret:
/// the wall clock's nanoseconds, the process id and an address of this
/// process, mixed; different per process and not guessable from outside,
/// which is all they need (S10).
pub fn process_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let local = 0u8;
    let address = &local as *const u8 as u64;
    let mut rng = rungs_core::rng::SplitMix64::new(
        nanos ^ u64::from(std::process::id()).rotate_left(32) ^ address.rotate_left(17),
    );
    rng.next_u64()
}

/// Seed the core's connection nonces (S8) from [`process_seed`], once per
/// process; later calls do nothing. Every edge that makes links calls it
/// before the first one: the C library on its first call, `rungs-relay` and
/// a LAN host when they start. A Rust program using `rungs-core` directly
/// calls it (or `rungs_core::link::seed_connection_nonces` with its own
/// entropy) at start-up.
pub fn seed_connection_nonces() {
    static SEEDED: std::sync::Once = std::sync::Once::new();
    SEEDED.call_once(|| rungs_core::link::seed_connection_nonces(process_seed()));
}
