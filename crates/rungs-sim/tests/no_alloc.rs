//! A running game allocates nothing per frame: after warm-up, a
//! machine in an 8-player game runs thousands of frames — reports,
//! evaluations, timing events, staged decreases, queued commands — without
//! a single heap allocation. Counted with a global allocator wrapper.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use rungs_core::report::Report;
use rungs_core::timing::{MachineConfig, TimingMachine};

struct Counting;

thread_local! {
    // Only the test's own thread is counted: the test harness's main thread
    // may allocate meanwhile (its timers and reports), which says nothing
    // about the timing machine.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    // Per thread too, so tests running side by side do not add up.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn counting() -> bool {
    COUNTING.try_with(Cell::get).unwrap_or(false)
}

fn count_one() {
    let _ = ALLOCATIONS.try_with(|a| a.set(a.get() + 1));
}

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counting() {
            count_one();
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if counting() {
            count_one();
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn steady_state_frames_do_not_allocate() {
    let players = 8u8;
    let config = MachineConfig::adaptive(30, vec![true; 8], Some(0));
    let mut machine = TimingMachine::new(&config).unwrap();
    let mut events = Vec::with_capacity(1024);
    let mut unsent: Vec<u64> = Vec::with_capacity(16);
    let mut run = |machine: &mut TimingMachine, from: u32, to: u32| {
        for frame in from..to {
            machine.begin_frame(frame).unwrap();
            while let Some(due) = machine.pop_due() {
                if due.item >= 1_000_000 {
                    let event = events[(due.item - 1_000_000) as usize];
                    machine.execute_timing_event(0, event).unwrap();
                }
            }
            if frame % 128 == 38 {
                // A spike between 3000 and 4000 forces worsening and a later descent.
                let rtt = if (3000..4000).contains(&frame) {
                    900
                } else {
                    60
                };
                for seat in 0..players {
                    let report = Report {
                        process_us: 9000,
                        max_wait_ms: 0,
                        worst_rtt_ms: Some(rtt),
                        detail: None,
                    };
                    machine.execute_report(seat, report).unwrap();
                }
            }
            if let Some(event) = machine.end_frame().unwrap() {
                unsent.push(1_000_000 + events.len() as u64);
                events.push(event);
            }
            if machine.is_send_frame() {
                let tag = machine.command_tag();
                machine.queue_command(tag, 0, u64::from(frame)).unwrap();
                for item in unsent.drain(..) {
                    machine.queue_command(tag, 0, item).unwrap();
                }
            }
            while machine.poll_output().is_some() {}
        }
    };
    run(&mut machine, 0, 1000);
    COUNTING.with(|c| c.set(true));
    run(&mut machine, 1000, 12_000);
    COUNTING.with(|c| c.set(false));
    let status = machine.status();
    assert!(
        status.timing.send_period() <= 2,
        "the game came back down after the spike: {:?}",
        status.timing
    );
    assert_eq!(allocations(), 0, "heap allocations in steady state");
}

/// A lockstep session's frame, packets included: an 8-player game on an
/// instant in-memory network (`rungs_sim::InstantGame`), 2000 frames
/// after warm-up, with reports, clock pings, checksums and acks, allocates
/// nothing on any machine.
#[test]
fn steady_state_lockstep_frames_do_not_allocate() {
    let mut game =
        rungs_sim::InstantGame::new(8, 30, rungs_core::timing::PolicyKind::Adaptive).unwrap();
    // Warm-up: clock sync, the first reports and evaluations, every buffer
    // and queue at its working size.
    for _ in 0..1000 {
        game.step().unwrap();
    }
    let (frames, packets) = (game.frames(), game.packets());
    let before = allocations();
    COUNTING.with(|c| c.set(true));
    for _ in 0..2000 {
        game.step().unwrap();
    }
    COUNTING.with(|c| c.set(false));
    let allocations = allocations() - before;
    assert_eq!(
        game.frames() - frames,
        8 * 2000,
        "every machine ran every frame"
    );
    // Each machine sends its turn to its 7 peers every frame at send
    // period 1; the acks ride on them.
    let sent = game.packets() - packets;
    assert!(sent >= 7 * 8 * 2000, "turns went out: {sent} packets");
    assert_eq!(
        allocations, 0,
        "heap allocations in 2000 steady frames of 8 machines"
    );
}
