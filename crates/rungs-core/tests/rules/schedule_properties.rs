//! Properties of the schedule in force for every reachable timing (S1, S5):
//! - `look_ahead % send_period == 0` (and the other S1 bounds) on every frame;
//! - a command issued on a later frame is never due before one issued earlier;
//! - every command executes exactly once, on a send frame, at or after its tag.
//!
//! Timings are reached two ways: by the master's own policy fed random
//! reports, and by arbitrary ladder targets (rungs and extended `10/L`)
//! executed at arbitrary moments, including mid-way through staged decreases.

use proptest::prelude::*;

use rungs_core::report::Report;
use rungs_core::timing::{required, MachineConfig, Timing, TimingEvent, TimingMachine};

/// What an input frame holds besides the one command issued every frame.
#[derive(Debug, Clone)]
enum Step {
    Nothing,
    /// Every player reports (rtt `None` = no round trip); wait and process time too.
    Reports {
        rtt: Option<u32>,
        wait_ms: u32,
        process_us: u32,
    },
    /// A timing event (from the ladder) is issued by the master now.
    Event {
        owt: u32,
        fps: u8,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => Just(Step::Nothing),
        2 => (prop::option::weighted(0.9, 0u32..3000), 0u32..200, 0u32..60_000)
            .prop_map(|(rtt, wait_ms, process_us)| Step::Reports { rtt, wait_ms, process_us }),
        1 => (0u32..260, 1u8..=60).prop_map(|(owt, fps)| Step::Event { owt, fps }),
    ]
}

/// Drive one machine for `steps.len()` frames: each frame one command is
/// issued; policy events (when `use_policy`) and scripted events are queued
/// as commands like the engine would. Checks the invariants as it goes.
fn drive(steps: &[Step], use_policy: bool) -> Result<Vec<Timing>, TestCaseError> {
    let config = MachineConfig::adaptive(30, vec![true, true], Some(0));
    let mut machine = TimingMachine::new(&config).unwrap();
    // Item encoding: even = plain command number * 2, odd = timing event index * 2 + 1.
    let mut events: Vec<TimingEvent> = Vec::new();
    let mut issued_on: Vec<u32> = Vec::new(); // plain command -> frame issued
    let mut executed_on: Vec<Option<u32>> = Vec::new();
    let mut unsent: Vec<u64> = Vec::new();
    let mut last_tag = 0u32;
    let mut last_exec_of_issue: Option<(u32, u32)> = None; // (issue frame, exec frame)
    let mut visited: Vec<Timing> = Vec::new();
    // Forecast of the tag for this send period's commands, and whether a
    // timing event executed since it was made (which may change it).
    let mut forecast: Option<(u32, bool, u32)> = None;

    for (frame, step) in steps.iter().enumerate() {
        let frame = frame as u32;
        let start = machine.begin_frame(frame).unwrap();
        while let Some(due) = machine.pop_due() {
            prop_assert!(start.executes_commands);
            prop_assert!(due.tag <= frame, "executed before its tag");
            if due.item % 2 == 1 {
                machine
                    .execute_timing_event(0, events[(due.item / 2) as usize])
                    .unwrap();
                if let Some((_, changed, _)) = forecast.as_mut() {
                    *changed = true;
                }
            } else {
                let command = (due.item / 2) as usize;
                prop_assert!(executed_on[command].is_none(), "executed twice");
                executed_on[command] = Some(frame);
            }
        }
        let timing = machine.timing();
        prop_assert!(
            Timing::new(timing.send_period(), timing.look_ahead()).is_ok(),
            "S1 broken: {}",
            timing
        );
        if visited.last() != Some(&timing) {
            visited.push(timing);
        }

        match *step {
            Step::Reports {
                rtt,
                wait_ms,
                process_us,
            } => {
                for seat in 0..2 {
                    let report = Report {
                        process_us,
                        max_wait_ms: wait_ms,
                        worst_rtt_ms: rtt,
                        detail: None,
                    };
                    machine.execute_report(seat, report).unwrap();
                }
            }
            Step::Event { owt, fps } if !use_policy => {
                unsent.push(events.len() as u64 * 2 + 1);
                events.push(TimingEvent {
                    target: required(owt),
                    fps,
                });
            }
            _ => {}
        }
        unsent.push(issued_on.len() as u64 * 2);
        issued_on.push(frame);
        if forecast.is_none() {
            forecast = Some((machine.forecast_tag(frame), false, frame));
        }
        executed_on.push(None);

        if let Some(event) = machine.end_frame().unwrap() {
            if use_policy {
                unsent.push(events.len() as u64 * 2 + 1);
                events.push(event);
            }
        }
        if machine.is_send_frame() {
            let tag = machine.command_tag();
            prop_assert!(
                tag >= last_tag,
                "tag went backwards: {} after {}",
                tag,
                last_tag
            );
            prop_assert!(tag > frame);
            if let Some((expected, false, made_on)) = forecast {
                prop_assert_eq!(
                    tag,
                    expected,
                    "forecast made on {} missed with no event in between (frame {}, timing {})",
                    made_on,
                    frame,
                    machine.timing()
                );
            }
            forecast = None;
            last_tag = tag;
            for item in unsent.drain(..) {
                machine.queue_command(tag, 0, item).unwrap();
            }
        }
        while machine.poll_output().is_some() {}
    }
    // Commands that executed: on a send frame, never earlier than a command issued before them.
    for (command, exec) in executed_on.iter().enumerate() {
        if let Some(exec) = *exec {
            if let Some((issued_before, exec_before)) = last_exec_of_issue {
                prop_assert!(issued_before <= issued_on[command]);
                prop_assert!(exec >= exec_before, "a later command executed earlier");
            }
            last_exec_of_issue = Some((issued_on[command], exec));
        } else {
            // Not executed: only because the game ended before its frame.
            prop_assert!(machine.queued_commands() > 0);
        }
    }
    Ok(visited)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_under_the_masters_own_policy(steps in prop::collection::vec(step(), 1500..4000)) {
        drive(&steps, true)?;
    }

    #[test]
    fn invariants_hold_for_arbitrary_ladder_events(steps in prop::collection::vec(step(), 500..3000)) {
        drive(&steps, false)?;
    }
}

/// The policy, driven by a spike and a recovery, reaches extended timings,
/// stages decreases and steps down through every rung — the same walk the
/// properties above take at random, pinned once.
#[test]
fn a_spike_walks_the_whole_ladder_without_breaking_s1() {
    let steps: Vec<Step> = (0..6000u32)
        .map(|f| match f % 128 {
            38 => Step::Reports {
                rtt: Some(if (300..700).contains(&f) { 4000 } else { 30 }),
                wait_ms: 0,
                process_us: 8000,
            },
            _ => Step::Nothing,
        })
        .collect();
    let visited = drive(&steps, true).unwrap();
    let shown: Vec<String> = visited.iter().map(|t| t.to_string()).collect();
    // Up to an extended look-ahead, down one staged step at a time, back to rung 1.
    assert!(visited.iter().any(|t| t.is_extended()), "{shown:?}");
    assert!(shown.contains(&"9/27".to_string()), "{shown:?}");
    assert_eq!(shown.last().map(String::as_str), Some("1/4"), "{shown:?}");
    for rung in 2..=9 {
        let timing = Timing::of_rung(rung).unwrap();
        assert!(visited.contains(&timing), "rung {rung} skipped: {shown:?}");
    }
}
