//! A C engine that adopts the pieces one at a time (`rungs_measurements`,
//! the payload codecs, `rungs_timing_machine`) runs the `tracking` policy
//! as the Rust core does: the same game driven through the core's types and
//! through the C calls, reports in the detailed NETWORK_REPORT layout, gives
//! the same timing events. Without the detail (the extended layout) the
//! policy sees only the worst round trip and "waited at all", and answers
//! a spike already over and waits for a CPU-bound seat that the detail
//! explains. `ffi-tests/test_detailed_report.c` plays the same game from C
//! and expects the events pinned here.

use std::ptr;

use rungs::ffi::measure::*;
use rungs::ffi::payload::*;
use rungs::ffi::report::{rungs_report, rungs_report_detail, RUNGS_REPORT_DETAIL};
use rungs::ffi::result::RUNGS_OK;
use rungs::ffi::timing_machine::*;
use rungs::ffi::types::{rungs_timing_event, RUNGS_POLICY_TRACKING};
use rungs_core::report::Measurements;
use rungs_core::timing::{MachineConfig, PolicyKind, TimingMachine};
use rungs_core::wire::ReportLayout;

const SEATS: u8 = 2;
const LAST_FRAME: u32 = 144;

/// What one machine of the game does, through one API or the other.
trait Game {
    fn begin_frame(&mut self, frame: u32);
    fn frame_work_us(&mut self, seat: u8, us: u64);
    fn rtt_sample(&mut self, seat: u8, peer: u8, ms: u32);
    fn wait_for_us(&mut self, seat: u8, us: u64, waited_for: u8);
    fn is_report_frame(&mut self, frame: u32) -> bool;
    /// `seat` takes its report, sends it in the detailed layout (or the
    /// extended one), and the report executes on the master's machine.
    /// The master's own report first asks for a raise for its own stall:
    /// the event, if any, it would queue with the report.
    fn report(&mut self, seat: u8, detailed: bool) -> Option<(u8, u8, u8)>;
    /// The timing event the master sends at the end of the frame.
    fn end_frame(&mut self) -> Option<(u8, u8, u8)>;
}

/// Two players at 30 fps on a 60 ms link, reporting every 16 frames; seat
/// 0's frames take 31 ms (it is CPU-bound at 30 fps: 93 % of a frame). A
/// 600 ms sample on frame 20 (a spike already over by the report on 32); on
/// frames 66, 70, 74 seat 1 waits 100 ms for seat 0's turns; on 88-94 seat
/// 0 waits 10 ms for seat 1's, on 95 100 ms. Returns the timing events the
/// master (seat 0) sends: (frame, send period, look-ahead, fps), its
/// raises for its own stalls marked with a look-ahead's bit 7 (128 +).
fn play(game: &mut dyn Game, detailed: bool) -> Vec<(u32, u8, u8, u8)> {
    let mut sent = Vec::new();
    for frame in 0..=LAST_FRAME {
        game.begin_frame(frame);
        if frame > 0 {
            game.frame_work_us(0, 31_000);
            game.frame_work_us(1, 5_000);
            let rtt = if frame == 20 { 600 } else { 60 };
            game.rtt_sample(0, 1, rtt);
            game.rtt_sample(1, 0, rtt);
        }
        if [66, 70, 74].contains(&frame) {
            game.wait_for_us(1, 100_000, 0);
        }
        if (88..95).contains(&frame) {
            game.wait_for_us(0, 10_000, 1);
        }
        if frame == 95 {
            game.wait_for_us(0, 100_000, 1);
        }
        if game.is_report_frame(frame) {
            for seat in 0..SEATS {
                if let Some((send_period, look_ahead, fps)) = game.report(seat, detailed) {
                    sent.push((frame, send_period, 128 + look_ahead, fps));
                }
            }
        }
        if let Some((send_period, look_ahead, fps)) = game.end_frame() {
            sent.push((frame, send_period, look_ahead, fps));
        }
    }
    sent
}

/// The core's types.
struct Core {
    measurements: Vec<Measurements>,
    machine: TimingMachine,
}

impl Core {
    fn new() -> Core {
        let config = MachineConfig {
            policy: PolicyKind::Tracking,
            ..MachineConfig::adaptive(30, vec![true; usize::from(SEATS)], Some(0))
        };
        let mut measurements: Vec<Measurements> = (0..SEATS).map(|_| Measurements::new()).collect();
        measurements[0].add_peer(1).unwrap();
        measurements[1].add_peer(0).unwrap();
        Core {
            measurements,
            machine: TimingMachine::new(&config).unwrap(),
        }
    }
}

impl Game for Core {
    fn begin_frame(&mut self, frame: u32) {
        self.machine.begin_frame(frame).unwrap();
    }
    fn frame_work_us(&mut self, seat: u8, us: u64) {
        self.measurements[usize::from(seat)].add_frame_work_us(us);
    }
    fn rtt_sample(&mut self, seat: u8, peer: u8, ms: u32) {
        self.measurements[usize::from(seat)]
            .add_rtt_sample(peer, ms, true)
            .unwrap();
    }
    fn wait_for_us(&mut self, seat: u8, us: u64, waited_for: u8) {
        self.measurements[usize::from(seat)].add_wait_for_us(us, Some(waited_for));
    }
    fn is_report_frame(&mut self, frame: u32) -> bool {
        self.machine.is_report_frame(frame)
    }
    fn report(&mut self, seat: u8, detailed: bool) -> Option<(u8, u8, u8)> {
        let layout = if detailed {
            ReportLayout::Detailed
        } else {
            ReportLayout::Extended
        };
        let report = self.measurements[usize::from(seat)].take_report();
        let raise = if seat == 0 {
            self.machine.raise_for_own_stall(&report).unwrap()
        } else {
            None
        };
        let mut bytes = [0u8; 22];
        let len = layout.encode(&report, &mut bytes).unwrap();
        let executed = layout.decode(&bytes[..len]).unwrap();
        self.machine.execute_report(seat, executed).unwrap();
        raise.map(|event| {
            (
                event.target.send_period(),
                event.target.look_ahead(),
                event.fps,
            )
        })
    }
    fn end_frame(&mut self) -> Option<(u8, u8, u8)> {
        let event = self.machine.end_frame().unwrap()?;
        Some((
            event.target.send_period(),
            event.target.look_ahead(),
            event.fps,
        ))
    }
}

/// The C calls, as a C engine makes them.
struct CApi {
    measurements: Vec<*mut rungs_measurements>,
    machine: *mut rungs_timing_machine,
}

impl CApi {
    fn new() -> CApi {
        // SAFETY: every pointer handed over is live; handles are freed in Drop.
        unsafe {
            let mut measurements = Vec::new();
            for seat in 0..SEATS {
                let mut m = ptr::null_mut();
                assert_eq!(rungs_measurements_new(&mut m), RUNGS_OK);
                assert_eq!(rungs_measurements_add_peer(m, 1 - seat), RUNGS_OK);
                measurements.push(m);
            }
            let config = rungs_timing_machine_config {
                struct_size: std::mem::size_of::<rungs_timing_machine_config>() as u32,
                speed_fps: 30,
                seat_count: SEATS,
                local_seat: 0,
                policy: RUNGS_POLICY_TRACKING,
                human_seat_mask: 0b11,
                callbacks: rungs_timing_callbacks {
                    user: ptr::null_mut(),
                    timing_changed: None,
                    frame_rate_changed: None,
                    player_message: None,
                    master_changed: None,
                },
                tick_hz: 0,
            };
            let mut machine = ptr::null_mut();
            assert_eq!(rungs_timing_machine_new(&config, &mut machine), RUNGS_OK);
            CApi {
                measurements,
                machine,
            }
        }
    }

    fn m(&self, seat: u8) -> *mut rungs_measurements {
        self.measurements[usize::from(seat)]
    }

    /// The master's raise for its own stall, for a report with or without
    /// its detail section.
    fn raise_for_own_stall(&self, report: &rungs_report) -> Option<(u8, u8, u8)> {
        let mut has = -1;
        let mut event = rungs_timing_event::default();
        // SAFETY: a live machine, a report, out-pointers.
        let result = unsafe {
            rungs_timing_machine_raise_for_own_stall(self.machine, report, &mut has, &mut event)
        };
        assert_eq!(result, RUNGS_OK);
        (has == 1).then_some((event.send_period, event.look_ahead, event.fps))
    }
}

impl Drop for CApi {
    fn drop(&mut self) {
        // SAFETY: handles from `_new`, not used again.
        unsafe {
            for &m in &self.measurements {
                rungs_measurements_free(m);
            }
            rungs_timing_machine_free(self.machine);
        }
    }
}

impl Game for CApi {
    fn begin_frame(&mut self, frame: u32) {
        // SAFETY: a live machine; NULL out-pointer allowed.
        let result =
            unsafe { rungs_timing_machine_frame_begin(self.machine, frame, ptr::null_mut()) };
        assert_eq!(result, RUNGS_OK);
    }
    fn frame_work_us(&mut self, seat: u8, us: u64) {
        // SAFETY: live measurements.
        assert_eq!(
            unsafe { rungs_measurements_add_frame_work_us(self.m(seat), us) },
            RUNGS_OK
        );
    }
    fn rtt_sample(&mut self, seat: u8, peer: u8, ms: u32) {
        // SAFETY: live measurements.
        let result = unsafe { rungs_measurements_add_rtt_sample(self.m(seat), peer, ms, 1) };
        assert_eq!(result, RUNGS_OK);
    }
    fn wait_for_us(&mut self, seat: u8, us: u64, waited_for: u8) {
        // SAFETY: live measurements.
        let result = unsafe { rungs_measurements_add_wait_for_us(self.m(seat), us, waited_for) };
        assert_eq!(result, RUNGS_OK);
    }
    fn is_report_frame(&mut self, frame: u32) -> bool {
        let mut due = -1;
        // SAFETY: a live machine and out-pointer.
        let result = unsafe { rungs_timing_machine_is_report_frame(self.machine, frame, &mut due) };
        assert_eq!(result, RUNGS_OK);
        due == 1
    }
    fn report(&mut self, seat: u8, detailed: bool) -> Option<(u8, u8, u8)> {
        // One take, encode, decode and execute whatever the sections: the
        // detailed layout when the detail is asked for, else the extended.
        let sections = if detailed { RUNGS_REPORT_DETAIL } else { 0 };
        let mut report = rungs_report::default();
        let mut bytes = [0u8; RUNGS_REPORT_DETAILED_PAYLOAD_LEN];
        let mut len = 0;
        let mut got = rungs_report::default();
        let mut raise = None;
        // SAFETY: live handles, reports with their struct_size, and a
        // buffer of the stated size.
        unsafe {
            let m = self.m(seat);
            assert_eq!(
                rungs_measurements_take_report(m, sections, &mut report),
                RUNGS_OK
            );
            assert_eq!(report.has_detail, u8::from(detailed));
            let (buf, cap) = (bytes.as_mut_ptr(), bytes.len());
            let basic = RUNGS_REPORT_LAYOUT_EXTENDED;
            assert_eq!(
                rungs_report_payload_encode(&report, basic, buf, cap, &mut len),
                RUNGS_OK
            );
            let expected_len = if detailed {
                RUNGS_REPORT_DETAILED_PAYLOAD_LEN
            } else {
                RUNGS_REPORT_EXTENDED_PAYLOAD_LEN
            };
            assert_eq!(len, expected_len);
            assert_eq!(
                rungs_report_payload_decode(bytes.as_ptr(), len, &mut got),
                RUNGS_OK
            );
            assert_eq!(got, report, "nothing here saturates");
            if seat == 0 {
                raise = self.raise_for_own_stall(&report);
            }
            let result = rungs_timing_machine_execute_report(self.machine, seat, &got);
            assert_eq!(result, RUNGS_OK);
        }
        raise
    }
    fn end_frame(&mut self) -> Option<(u8, u8, u8)> {
        let mut has = -1;
        let mut event = rungs_timing_event::default();
        // SAFETY: a live machine and out-pointers.
        let result = unsafe { rungs_timing_machine_frame_end(self.machine, &mut has, &mut event) };
        assert_eq!(result, RUNGS_OK);
        (has == 1).then_some((event.send_period, event.look_ahead, event.fps))
    }
}

#[test]
fn a_c_engine_on_detailed_reports_gets_the_core_s_events() {
    let core = play(&mut Core::new(), true);
    assert_eq!(play(&mut CApi::new(), true), core);
    // Frame 16: 60 ms needs one frame (30 ms one way at 30 fps), and the
    // game's prior margin adds one (decision 53). The spike
    // on 20 is one sample of 16, over by 32: the distribution (median, p90,
    // latest 60) does not answer it. The waits for seat 0 are its slow CPU
    // (the detail names the seat), which the rate answers, not the margin.
    // Of the stalls of 81-96 the longest waited 100 ms: the look-ahead
    // lacked three frames (a stall is read by its longest wait, as the
    // first stall of a spike or a lost turn's wait for its copy is), and
    // the margin rises by one of them (decision 102).
    assert_eq!(core, [(16, 1, 2, 30), (96, 1, 3, 30)]);

    let core_worst_only = play(&mut Core::new(), false);
    assert_eq!(play(&mut CApi::new(), false), core_worst_only);
    // Without the detail: the spike's 600 ms worst sample is answered on 32
    // (9 frames and the prior margin's one), with the phase frame of a
    // spike's rise (decision 59), held until 32 + 11 + 32 = 75; a 100 ms
    // wait of nobody known buys a frame of margin on 80 (1 + 2, decision
    // 102). The stalls of 81-96 waited under the 11 still in force (the
    // decrease of 80 had not reached the turns): the longest, 100 ms,
    // lacked 3 frames, so they ask for 14, and each report that still asks
    // raises the margin a frame (96, 112). The master's own report asks
    // for no more than the 11 in force, so it sends nothing at once.
    assert_eq!(
        core_worst_only,
        [
            (16, 1, 2, 30),
            (32, 1, 11, 30),
            (80, 1, 3, 30),
            (96, 1, 4, 30),
            (112, 1, 5, 30)
        ]
    );
}

/// A C engine's master queues its raise for its own stall with its report
/// (`rungs_timing_machine_raise_for_own_stall`), as the lockstep and
/// engine sessions do: 120 ms round trips at 30 fps run `1/3` (two
/// frames and the prior margin's one); a spike's first stall waits 684 ms
/// while the round trips, half back, say 810 ms.
#[test]
fn a_c_master_raises_for_its_own_stall_with_its_report() {
    use rungs::ffi::result::{RUNGS_ERR_NULL_POINTER, RUNGS_ERR_STATE};
    let api = CApi::new();
    let m = api.machine;
    let calm_basic = rungs_report {
        process_us: 5000,
        max_wait_ms: 0,
        worst_rtt_ms: 120,
        has_worst_rtt: 1,
        ..rungs_report::default()
    };
    let calm_detail = rungs_report_detail {
        median_rtt_ms: 120,
        p90_rtt_ms: 120,
        latest_rtt_ms: 120,
        frames: 16,
        stalled_frames: 0,
        stall_ms: 0,
        has_median_rtt: 1,
        has_p90_rtt: 1,
        has_latest_rtt: 1,
        waited_for: rungs::ffi::types::RUNGS_NO_SEAT,
    };
    let onset_basic = rungs_report {
        max_wait_ms: 684,
        worst_rtt_ms: 810,
        ..calm_basic
    };
    let onset_detail = rungs_report_detail {
        p90_rtt_ms: 810,
        latest_rtt_ms: 810,
        frames: 6,
        stalled_frames: 2,
        stall_ms: 687,
        waited_for: 1,
        ..calm_detail
    };
    let with_detail = |basic: rungs_report, detail| rungs_report {
        has_detail: 1,
        detail,
        ..basic
    };
    let (calm, onset) = (
        with_detail(calm_basic, calm_detail),
        with_detail(onset_basic, onset_detail),
    );
    let (mut has, mut event) = (-1, rungs_timing_event::default());
    let mut opening = None;
    // SAFETY: a live machine, reports and out-pointers (NULLs where the
    // test says so).
    unsafe {
        let frame = |f: u32| {
            assert_eq!(
                rungs_timing_machine_frame_begin(m, f, ptr::null_mut()),
                RUNGS_OK
            );
        };
        let end = || {
            let (mut has, mut event) = (-1, rungs_timing_event::default());
            assert_eq!(
                rungs_timing_machine_frame_end(m, &mut has, &mut event),
                RUNGS_OK
            );
            (has == 1).then_some(event)
        };
        let raise = |has: &mut i32, event: &mut rungs_timing_event| {
            rungs_timing_machine_raise_for_own_stall(m, &onset, has, event)
        };
        // No frame open.
        assert_eq!(raise(&mut has, &mut event), RUNGS_ERR_STATE);
        for f in 0..=59 {
            frame(f);
            if f == 25 {
                for seat in 0..2 {
                    let result = rungs_timing_machine_execute_report(m, seat, &calm);
                    assert_eq!(result, RUNGS_OK);
                }
            }
            if f == 35 {
                let opening: &rungs_timing_event = opening.as_ref().unwrap();
                assert_eq!(
                    rungs_timing_machine_execute_timing_event(m, 0, opening),
                    RUNGS_OK
                );
            }
            if let Some(sent) = end() {
                opening = Some(sent);
            }
        }
        assert_eq!(opening.map(|e| e.look_ahead), Some(3));
        frame(60);
        assert_eq!(
            rungs_timing_machine_raise_for_own_stall(m, ptr::null(), &mut has, &mut event),
            RUNGS_ERR_NULL_POINTER
        );
        // A spike's first stall raises nothing until the frames after it
        // say it goes on (decision 75)...
        assert_eq!(raise(&mut has, &mut event), RUNGS_OK);
        assert_eq!(has, 0);
        for seat in 0..2 {
            let result = rungs_timing_machine_execute_report(m, seat, &onset);
            assert_eq!(result, RUNGS_OK);
        }
        assert!(
            end().is_none(),
            "the evaluation sees the spike ask, answers nothing yet"
        );
        // ...as the master's next stall does: 3 in force, 21 lacking, up
        // to the margin's 9 over the 13 frames the half-back round trips
        // need, and the phase frame of a spike's rise (decision 59).
        frame(61);
        assert_eq!(raise(&mut has, &mut event), RUNGS_OK);
        assert_eq!((has, event.send_period, event.look_ahead), (1, 1, 23));
        // Once per raise; and without the detail the same stall reads as
        // one stalled frame of 684 ms, no more than the raise on its way.
        assert_eq!(raise(&mut has, &mut event), RUNGS_OK);
        assert_eq!(has, 0);
        assert_eq!(
            rungs_timing_machine_raise_for_own_stall(m, &onset_basic, &mut has, ptr::null_mut()),
            RUNGS_OK
        );
        assert_eq!(has, 0);
    }
}
