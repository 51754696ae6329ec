//! One `LockstepSession` frame of an 8-player game, packets included:
//! eight real sessions on an instant in-memory network
//! (`rungs_sim::InstantGame`), warmed up past clock sync and the first
//! reports, then stepped a frame at a time. The figure is per machine per
//! frame: a step (every machine's frame, its turn built, tagged and sent to
//! 7 peers, and its peers' 7 turns validated, assembled and queued, acks
//! riding on them) divided by 8. Target: under 20 µs.
//!
//! `cargo bench --bench lockstep_frame -- --warm-up-time 1 --measurement-time 5`.
//! Timing figures live here, never in pass/fail tests.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use rungs_core::timing::PolicyKind;
use rungs_sim::InstantGame;

const PLAYERS: u8 = 8;

fn lockstep_frame(c: &mut Criterion) {
    let mut game = InstantGame::new(PLAYERS, 30, PolicyKind::Adaptive).expect("game");
    for _ in 0..1000 {
        game.step().expect("warm-up frame");
    }
    let (frames, packets) = (game.frames(), game.packets());
    c.bench_function("lockstep_frame_8_players_per_machine", |b| {
        b.iter_custom(|iters| {
            // `iters` machine frames: iters / 8 steps of all eight machines.
            let steps = iters.div_ceil(u64::from(PLAYERS));
            let start = Instant::now();
            for _ in 0..steps {
                game.step().expect("frame");
            }
            let elapsed = start.elapsed();
            Duration::from_nanos(
                (elapsed.as_nanos() * u128::from(iters) / u128::from(steps * u64::from(PLAYERS)))
                    as u64,
            )
        })
    });
    let frames_run = game.frames() - frames;
    eprintln!(
        "lockstep_frame: {:.1} packets per machine per frame over {} machine frames",
        (game.packets() - packets) as f64 / frames_run.max(1) as f64,
        frames_run
    );
}

criterion_group!(benches, lockstep_frame);
criterion_main!(benches);
