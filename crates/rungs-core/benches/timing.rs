//! Benchmarks for the timing core (S2–S6): one frame step of a machine in
//! a running 8-player game, and one master evaluation over 8 players.
//!
//! Run: `cargo bench --bench timing`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use rungs_core::report::{Record, Report};
use rungs_core::timing::{MachineConfig, MasterPolicy, TimingMachine};

const PLAYERS: u8 = 8;

fn report(seat: u8) -> Report {
    Report {
        process_us: 8000 + u32::from(seat) * 100,
        max_wait_ms: 0,
        worst_rtt_ms: Some(60 + u32::from(seat)),
        detail: None,
    }
}

/// One frame of an 8-player game as the engine drives it: begin, due
/// commands, reports on report frames, evaluation, send-frame tagging.
fn step(machine: &mut TimingMachine, frame: u32) {
    machine.begin_frame(frame).unwrap();
    while let Some(due) = machine.pop_due() {
        black_box(due);
    }
    if frame % 128 == 38 {
        for seat in 0..PLAYERS {
            machine.execute_report(seat, report(seat)).unwrap();
        }
    }
    let event = machine.end_frame().unwrap();
    if machine.is_send_frame() {
        let tag = machine.command_tag();
        machine.queue_command(tag, 0, u64::from(frame)).unwrap();
        if let Some(event) = event {
            black_box(event);
        }
    }
    while let Some(output) = machine.poll_output() {
        black_box(output);
    }
}

fn frame_step(c: &mut Criterion) {
    let config = MachineConfig::adaptive(30, vec![true; PLAYERS as usize], Some(0));
    let mut machine = TimingMachine::new(&config).unwrap();
    let mut frame = 0u32;
    // Past calibration, into steady state.
    while frame < 2000 {
        step(&mut machine, frame);
        frame += 1;
    }
    c.bench_function("frame_step_8_players", |b| {
        b.iter(|| {
            step(&mut machine, frame);
            frame += 1;
        })
    });
}

fn evaluation(c: &mut Criterion) {
    let mut record = Record::new(0, 0..PLAYERS);
    for seat in 0..PLAYERS {
        record.apply_report(seat, 1100, report(seat)).unwrap();
    }
    let mut policy = MasterPolicy::new(30);
    policy.evaluate(&record, 64); // calibrated
    c.bench_function("master_evaluation_8_players", |b| {
        b.iter_batched_ref(
            || policy.clone(),
            |policy| black_box(policy.evaluate(black_box(&record), black_box(1152))),
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, frame_step, evaluation);
criterion_main!(benches);
