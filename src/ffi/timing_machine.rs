//! `rungs_timing_machine`: one machine's adaptive timing (S3–S6), driven
//! frame by frame by the engine. See `timing::machine` for the frame order.

use std::ffi::c_void;

use super::args::{
    field_offset, in_range, read_grown_config, read_in, require, write_optional, write_out,
    write_to,
};
use super::guard::{call, free_call, hand_out, object_call, Guarded, Handle};
use super::report::{read_report, rungs_report};
use super::result::{rungs_result, CallError};
use super::types::rungs_policy;
use super::types::rungs_tier;
use super::types::{
    human_seats, local_seat, rungs_frame_rate_changed_fn, rungs_player_message_fn,
    rungs_seat_event_fn, rungs_timing, rungs_timing_changed_fn, rungs_timing_event, timing_policy,
    RUNGS_NO_SEAT,
};
use crate::timing::{
    player_message_c_text, MachineConfig, Output, TickTimer, TimingEvent, TimingMachine, Verdict,
};

/// Callbacks, each optional (NULL). They run synchronously on the calling
/// thread, inside the call that caused them; calling back into the same
/// machine from one returns `RUNGS_ERR_REENTRANT`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rungs_timing_callbacks {
    /// Passed first to every callback.
    pub user: *mut c_void,
    /// The timing in force changed (and on frame 0).
    pub timing_changed: rungs_timing_changed_fn,
    /// The frame rate to pace at changed (and on frame 0).
    pub frame_rate_changed: rungs_frame_rate_changed_fn,
    /// A message for the player's message list (S6).
    pub player_message: rungs_player_message_fn,
    /// A removal handed the master role to `seat` (`RUNGS_NO_SEAT` if no
    /// human is left).
    pub master_changed: rungs_seat_event_fn,
}

/// How to set up a timing machine.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rungs_timing_machine_config {
    /// `sizeof(rungs_timing_machine_config)`, so the struct can grow.
    pub struct_size: u32,
    /// The rate the game speed allows, 1–255 (S4.2); the game starts at it.
    pub speed_fps: u8,
    /// Seats in house order, 1–16.
    pub seat_count: u8,
    /// This machine's seat (a human seat), or `RUNGS_NO_SEAT` for an observer.
    pub local_seat: u8,
    /// `RUNGS_POLICY_ADAPTIVE` (0) or `RUNGS_POLICY_TRACKING`; the same on
    /// every machine of a game.
    pub policy: rungs_policy,
    /// Bit `i` set: seat `i` is a human player. At least one, and no bit at
    /// or above `seat_count`.
    pub human_seat_mask: u32,
    pub callbacks: rungs_timing_callbacks,
    /// Ticks per second of the engine's frame timer when it counts whole
    /// ticks (60 for Tiberian Sun and Red Alert): every rate the machine
    /// starts at, sends and applies is one the timer hits exactly (a divisor
    /// of `tick_hz`, the largest at or below the rate the rules chose). 0:
    /// any rate. The same on every machine of a game. (Added after ABI 2's
    /// first release: a caller built against the older, smaller struct gets
    /// 0.)
    pub tick_hz: u8,
}

/// What a UI or log shows about the timing.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct rungs_timing_status {
    /// The current (or last) frame.
    pub frame: u32,
    /// Timing and rate in force.
    pub send_period: u8,
    pub look_ahead: u8,
    pub fps: u8,
    /// `RUNGS_TIER_*` of the timing in force.
    pub tier: rungs_tier,
    /// The master's target and rate.
    pub target_send_period: u8,
    pub target_look_ahead: u8,
    pub target_fps: u8,
    /// 1 while a staged decrease has not finished; its target follows.
    pub has_staged: u8,
    pub staged_send_period: u8,
    pub staged_look_ahead: u8,
    /// The master's seat, or `RUNGS_NO_SEAT`.
    pub master_seat: u8,
    /// 1 if this machine is the master.
    pub is_master: u8,
    /// 1 while the master is calibrating (S4.3).
    pub calibrating: u8,
    /// Qualifying evaluations in a row (the count of three, S4.4).
    pub qualifying_in_a_row: u8,
    /// 1 while a descent is running.
    pub descent_running: u8,
    /// Where the latest evaluation stopped: one of `RUNGS_VERDICT_*`.
    pub last_verdict: rungs_verdict,
}

/// The latest evaluation's outcome, one of `RUNGS_VERDICT_*`.
pub type rungs_verdict = u8;

/// No evaluation has happened yet.
pub const RUNGS_VERDICT_NONE: rungs_verdict = 0;
/// Calibration waits for reports (S4.3).
pub const RUNGS_VERDICT_CALIBRATION_WAITING: rungs_verdict = 1;
/// Calibration set the target.
pub const RUNGS_VERDICT_CALIBRATED: rungs_verdict = 2;
/// Calibration fell back to 3/9.
pub const RUNGS_VERDICT_CALIBRATION_FALLBACK: rungs_verdict = 3;
/// A silent player holds the timing (S4.4 step 1).
pub const RUNGS_VERDICT_SILENT_HELD: rungs_verdict = 4;
/// A silent player forced 10/250.
pub const RUNGS_VERDICT_SILENT_WORSENED: rungs_verdict = 5;
/// Round trips worsened the timing (step 2).
pub const RUNGS_VERDICT_WORSENED: rungs_verdict = 6;
/// A missing player holds the timing (step 3).
pub const RUNGS_VERDICT_MISSING_HELD: rungs_verdict = 7;
/// No improvement qualified (step 4).
pub const RUNGS_VERDICT_NOT_QUALIFIED: rungs_verdict = 8;
/// Counted towards the three (step 4).
pub const RUNGS_VERDICT_COUNTED: rungs_verdict = 9;
/// Stepped down (step 5).
pub const RUNGS_VERDICT_STEPPED_DOWN: rungs_verdict = 10;

fn verdict_code(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::NoEvaluation => RUNGS_VERDICT_NONE,
        Verdict::CalibrationWaiting => RUNGS_VERDICT_CALIBRATION_WAITING,
        Verdict::Calibrated => RUNGS_VERDICT_CALIBRATED,
        Verdict::CalibrationFallback => RUNGS_VERDICT_CALIBRATION_FALLBACK,
        Verdict::SilentHeld => RUNGS_VERDICT_SILENT_HELD,
        Verdict::SilentWorsened => RUNGS_VERDICT_SILENT_WORSENED,
        Verdict::Worsened => RUNGS_VERDICT_WORSENED,
        Verdict::MissingHeld => RUNGS_VERDICT_MISSING_HELD,
        Verdict::NotQualified => RUNGS_VERDICT_NOT_QUALIFIED,
        Verdict::Counted => RUNGS_VERDICT_COUNTED,
        Verdict::SteppedDown => RUNGS_VERDICT_STEPPED_DOWN,
    }
}

/// The machine and the engine's callbacks.
pub struct TimingMachineObject {
    machine: TimingMachine,
    callbacks: rungs_timing_callbacks,
}

impl TimingMachineObject {
    /// Deliver every queued output to the engine's callbacks.
    fn deliver(&mut self) {
        while let Some(output) = self.machine.poll_output() {
            // SAFETY: the engine gave these callbacks for exactly this use.
            unsafe { deliver_output(&self.callbacks, output) };
        }
    }
}

/// Hand one of the timing machine's outputs to the engine's callbacks (a
/// NULL callback is skipped). The engine session and the lockstep session
/// deliver the same four notices through this, with their own callbacks
/// gathered into a `rungs_timing_callbacks`.
///
/// # Safety
/// The function pointers and user pointer are the engine's, valid for this call.
pub(crate) unsafe fn deliver_output(cb: &rungs_timing_callbacks, output: Output) {
    // SAFETY: by contract; pointers passed in live until each callback returns.
    unsafe {
        match output {
            Output::TimingChanged { frame, timing } => {
                if let Some(f) = cb.timing_changed {
                    f(cb.user, frame, timing.send_period(), timing.look_ahead());
                }
            }
            Output::FrameRateChanged { frame, fps } => {
                if let Some(f) = cb.frame_rate_changed {
                    f(cb.user, frame, fps);
                }
            }
            Output::PlayerMessage { frame, tier } => {
                if let Some(f) = cb.player_message {
                    f(
                        cb.user,
                        frame,
                        tier as u8,
                        player_message_c_text(tier).as_ptr().cast(),
                    );
                }
            }
            Output::MasterChanged { frame, seat } => {
                if let Some(f) = cb.master_changed {
                    f(cb.user, frame, seat.unwrap_or(RUNGS_NO_SEAT));
                }
            }
        }
    }
}

/// An opaque timing machine. Made by `rungs_timing_machine_new`, released
/// by `rungs_timing_machine_free`; used from one thread at a time (a call
/// from another thread meanwhile gets `RUNGS_ERR_BUSY`).
pub struct rungs_timing_machine(Guarded<TimingMachineObject>);

impl Handle for rungs_timing_machine {
    type State = TimingMachineObject;
    fn guarded(&self) -> &Guarded<TimingMachineObject> {
        &self.0
    }
}

/// The C function `function`'s call on the machine behind `m`: `f` runs
/// inside the guard, then the machine's outputs go to the callbacks.
unsafe fn machine_call(
    function: &'static str,
    m: *const rungs_timing_machine,
    f: impl FnOnce(&mut TimingMachineObject) -> super::result::Result<()>,
) -> rungs_result {
    // SAFETY: NULL or a live machine (caller contract); the guard checks NULL.
    unsafe {
        object_call(function, m, |object| {
            let result = f(object);
            object.deliver();
            result
        })
    }
}

/// The engine's tick timer from `config->tick_hz` (0: none).
fn machine_tick_timer(
    config: &rungs_timing_machine_config,
) -> super::result::Result<Option<TickTimer>> {
    (config.tick_hz != 0)
        .then(|| TickTimer::new(config.tick_hz))
        .transpose()
        .map_err(CallError::from)
}

fn machine_config(config: &rungs_timing_machine_config) -> super::result::Result<MachineConfig> {
    let policy = timing_policy(config.policy, "config->policy")?;
    let speed_fps = in_range(config.speed_fps, 1, 255, "config->speed_fps")?;
    let human_seats = human_seats(config.seat_count, config.human_seat_mask)?;
    let local_seat = local_seat(config.local_seat, &human_seats, true)?;
    Ok(MachineConfig {
        policy,
        ..MachineConfig::adaptive(speed_fps, human_seats, local_seat)
    })
}

/// Fill `config` with the defaults: `struct_size` set,
/// `RUNGS_POLICY_ADAPTIVE`, seat 0, `tick_hz` 0 (any rate), no callbacks;
/// `speed_fps`, `seat_count` and `human_seat_mask` stay 0, which
/// `rungs_timing_machine_new` refuses: they describe your game.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if config is NULL; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_config_init(
    config: *mut rungs_timing_machine_config,
) -> rungs_result {
    call("rungs_timing_machine_config_init", || {
        // SAFETY: every field is valid zeroed (integers, NULL pointers, no
        // callbacks); the fields whose default is not 0 are set below.
        let mut defaults: rungs_timing_machine_config = unsafe { std::mem::zeroed() };
        defaults.struct_size = std::mem::size_of::<rungs_timing_machine_config>() as u32;

        // SAFETY: NULL (refused) or valid for writes by the caller's contract.
        unsafe { write_to(config, "config", defaults) }
    })
}

/// Make a timing machine for the eve of frame 0. `*out` is written only on success.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if config or out is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if config->struct_size is smaller than the
/// struct before `tick_hz` (an older caller gets `tick_hz` 0), config->policy
/// is not a RUNGS_POLICY_*,
/// config->speed_fps is 0, config->seat_count is not 1 to 16,
/// config->human_seat_mask is 0 or has a bit at or above seat_count, or
/// config->local_seat is neither a human seat nor `RUNGS_NO_SEAT`;
/// RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_new(
    config: *const rungs_timing_machine_config,
    out: *mut *mut rungs_timing_machine,
) -> rungs_result {
    call("rungs_timing_machine_new", || {
        require(out, "out")?;
        // SAFETY: read_grown_config checks NULL and struct_size before
        // reading the rest; every field is valid zeroed.
        let since = field_offset!(rungs_timing_machine_config, tick_hz);
        let config = unsafe { read_grown_config(config, "config", since)? };
        let machine = TimingMachine::with_tick_timer(
            &machine_config(&config)?,
            machine_tick_timer(&config)?,
        )?;
        let object = TimingMachineObject {
            machine,
            callbacks: config.callbacks,
        };
        // SAFETY: `out` is NULL (refused) or writable.
        unsafe { hand_out(out, rungs_timing_machine(Guarded::new(object))) }
    })
}

/// Release a machine. NULL is accepted.
///
/// Returns: RUNGS_OK (also for NULL); RUNGS_ERR_REENTRANT from one of m's
/// callbacks; RUNGS_ERR_BUSY while another thread is in a call on m (m is not
/// freed); RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_free(m: *mut rungs_timing_machine) -> rungs_result {
    // SAFETY: NULL or a live machine from `_new` (caller contract).
    unsafe { free_call("rungs_timing_machine_free", m) }
}

/// Step 1 of `frame` (frames run 0, 1, 2, ... without gaps): a staged
/// decrease activates or steps down. `*out_executes_commands` (may be NULL)
/// is 1 when this is a send frame whose due commands execute now.
///
/// Returns: RUNGS_OK; RUNGS_ERR_STATE if frame is not the frame after the
/// previous one (0 first), or the previous frame was not ended with
/// `rungs_timing_machine_frame_end`; RUNGS_ERR_NULL_POINTER if m is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_frame_begin(
    m: *mut rungs_timing_machine,
    frame: u32,
    out_executes_commands: *mut i32,
) -> rungs_result {
    unsafe {
        machine_call("rungs_timing_machine_frame_begin", m, |o| {
            let start = o.machine.begin_frame(frame)?;
            write_optional(out_executes_commands, i32::from(start.executes_commands));
            Ok(())
        })
    }
}

/// Queue a command from `seat` tagged for frame `tag`; `item` is your handle
/// for it (an index into your own event list, say). Push one seat's commands
/// in the order it issued them.
///
/// Returns: RUNGS_OK; RUNGS_ERR_UNKNOWN_SEAT if seat is not below
/// config->seat_count; RUNGS_ERR_STATE if the frame `tag` already executed its
/// commands; RUNGS_ERR_NULL_POINTER if m is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_queue_command(
    m: *mut rungs_timing_machine,
    tag: u32,
    seat: u8,
    item: u64,
) -> rungs_result {
    unsafe {
        machine_call("rungs_timing_machine_queue_command", m, |o| {
            o.machine
                .queue_command(tag, seat, item)
                .map_err(CallError::from)
        })
    }
}

/// The next queued command due on this frame, in (tag, seat, issue order).
/// `*out_found` is 1 and the other outputs (each may be NULL) are written
/// when there is one; 0 when none is due or the frame is not a send frame.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if m or out_found is NULL (nothing
/// popped).
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_pop_due(
    m: *mut rungs_timing_machine,
    out_found: *mut i32,
    out_item: *mut u64,
    out_tag: *mut u32,
    out_seat: *mut u8,
) -> rungs_result {
    unsafe {
        machine_call("rungs_timing_machine_pop_due", m, |o| {
            require(out_found, "out_found")?;
            let due = o.machine.pop_due();
            write_out(out_found, i32::from(due.is_some()));
            if let Some(due) = due {
                write_optional(out_item, due.item);
                write_optional(out_tag, due.tag);
                write_optional(out_seat, due.seat);
            }
            Ok(())
        })
    }
}

/// A timing event sent by `seat` executes on the current frame (S5, S6).
/// One from a player already removed (a removed master's last event) is
/// applied like any other: every machine executes it alike.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if m or event is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if event breaks S1 (send_period 1 to 10,
/// look_ahead a multiple of it up to 250) or event->fps is 0;
/// RUNGS_ERR_UNKNOWN_SEAT if seat never was a human seat of the game;
/// RUNGS_ERR_STATE if no frame is open (`rungs_timing_machine_frame_begin`).
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_execute_timing_event(
    m: *mut rungs_timing_machine,
    seat: u8,
    event: *const rungs_timing_event,
) -> rungs_result {
    unsafe {
        machine_call("rungs_timing_machine_execute_timing_event", m, |o| {
            let event = TimingEvent::try_from(read_in(event, "event")?)?;
            o.machine
                .execute_timing_event(seat, event)
                .map(|_| ())
                .map_err(CallError::from)
        })
    }
}

/// A report from `seat` executes on the current frame (S3), with the
/// sections it has. Under `RUNGS_POLICY_TRACKING` the detail is what the
/// policy reads (the round-trip distribution and the stalls; without it a
/// report reads as its worst round trip and as one stalled frame if it
/// waited at all) and the needs are the evidence its margin sheds by and a
/// decrease is checked against (docs/tracking.md, rule 10); the adaptive
/// policy reads the basic fields. A report from a player already removed
/// (it was in flight when the removal was issued) is a late event of
/// normal play: accepted, and it changes nothing.
///
/// Returns: RUNGS_OK (also for a late report); RUNGS_ERR_NULL_POINTER if m or
/// report is NULL; RUNGS_ERR_INVALID_ARGUMENT if report->struct_size is too
/// small, a has_ flag is neither 0 nor 1, has_needs is 1 without has_detail,
/// or a section breaks a rule of `rungs_report_detail` or
/// `rungs_look_ahead_needs` (nothing changes); RUNGS_ERR_UNKNOWN_SEAT if seat
/// never was a human seat of the game (nothing changes); RUNGS_ERR_STATE if
/// no frame is open.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_execute_report(
    m: *mut rungs_timing_machine,
    seat: u8,
    report: *const rungs_report,
) -> rungs_result {
    unsafe {
        machine_call("rungs_timing_machine_execute_report", m, |o| {
            let (report, _sections) = read_report(report, "report")?;
            o.machine
                .execute_report(seat, report)
                .map(|_late_or_applied| ())
                .map_err(CallError::from)
        })
    }
}

/// Under `RUNGS_POLICY_TRACKING`, on the master's machine: the timing
/// event for the stall the master's own report shows, to queue as a
/// command with that report, on the frame it was taken
/// (`rungs_measurements_take_report` with `RUNGS_REPORT_DETAIL` on a frame
/// `rungs_timing_machine_report_due` answered 1). The evaluation of the
/// report where it executes makes the same raise a look-ahead later; queued
/// now, the raise executes with the report, one run of a spike's stalls
/// sooner (docs/decisions.md, decision 50). `*out_has_event` is 1 and
/// `*out_event` holds the event when there is one; otherwise (not the
/// master, another policy, no stall the round trips or a slow CPU do not
/// explain, no more than in force, or a raise already on its way)
/// `*out_has_event` is 0. Either may be NULL. A report without its detail
/// reads as an older layout's (its worst round trip, one stalled frame if
/// it waited).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if m or report is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if the report is refused as by
/// `rungs_timing_machine_execute_report`; RUNGS_ERR_STATE if no frame is
/// open.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_raise_for_own_stall(
    m: *mut rungs_timing_machine,
    report: *const rungs_report,
    out_has_event: *mut i32,
    out_event: *mut rungs_timing_event,
) -> rungs_result {
    unsafe {
        machine_call("rungs_timing_machine_raise_for_own_stall", m, |o| {
            let (report, _sections) = read_report(report, "report")?;
            let event = o.machine.raise_for_own_stall(&report)?;
            write_optional(out_has_event, i32::from(event.is_some()));
            if let Some(event) = event {
                write_optional(out_event, event.into());
            }
            Ok(())
        })
    }
}

/// The removal of `seat` executes on the current frame (S3); removing the
/// master hands the role to the next human in house order (S4.6). A second
/// removal of a seat already removed (every machine may issue one for the
/// same lost player) is accepted and changes nothing.
///
/// Returns: RUNGS_OK (also for a repeated removal); RUNGS_ERR_UNKNOWN_SEAT if
/// seat never was a human seat of the game; RUNGS_ERR_STATE if no frame is
/// open; RUNGS_ERR_NULL_POINTER if m is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_execute_removal(
    m: *mut rungs_timing_machine,
    seat: u8,
) -> rungs_result {
    unsafe {
        machine_call("rungs_timing_machine_execute_removal", m, |o| {
            o.machine
                .execute_removal(seat)
                .map(|_late_or_applied| ())
                .map_err(CallError::from)
        })
    }
}

/// End the current frame with the master's evaluation (S4). On the master's
/// machine, on an evaluation that sends, `*out_has_event` is 1 and
/// `*out_event` holds the timing event to queue as a command in your own
/// event stream; otherwise `*out_has_event` is 0. Either may be NULL.
///
/// Returns: RUNGS_OK; RUNGS_ERR_STATE if no frame is open
/// (`rungs_timing_machine_frame_begin`); RUNGS_ERR_NULL_POINTER if m is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_frame_end(
    m: *mut rungs_timing_machine,
    out_has_event: *mut i32,
    out_event: *mut rungs_timing_event,
) -> rungs_result {
    unsafe {
        machine_call("rungs_timing_machine_frame_end", m, |o| {
            let event = o.machine.end_frame()?;
            write_optional(out_has_event, i32::from(event.is_some()));
            if let Some(event) = event {
                write_optional(out_event, event.into());
            }
            Ok(())
        })
    }
}

/// `*out` is 1 when the current frame is a send frame under the timing in
/// force now: send your packet (S5).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if m or out is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_is_send_frame(
    m: *mut rungs_timing_machine,
    out: *mut i32,
) -> rungs_result {
    unsafe {
        machine_call("rungs_timing_machine_is_send_frame", m, |o| {
            write_to(out, "out", i32::from(o.machine.is_send_frame()))
        })
    }
}

/// `*out` is 1 when each player sends a report on `frame` in this machine's
/// game: S3's frames (32, 64, then every 128, as `rungs_is_report_frame`)
/// under `RUNGS_POLICY_ADAPTIVE`, every 16 frames under
/// `RUNGS_POLICY_TRACKING`. Ask this, not `rungs_is_report_frame`, when the
/// game may run `tracking`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if m or out is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_is_report_frame(
    m: *mut rungs_timing_machine,
    frame: u32,
    out: *mut i32,
) -> rungs_result {
    unsafe {
        machine_call("rungs_timing_machine_is_report_frame", m, |o| {
            write_to(out, "out", i32::from(o.machine.is_report_frame(frame)))
        })
    }
}

/// `*out` is 1 when this machine's player reports at the end of `frame`,
/// its measurements holding `unreported_stalls` stalled frames since its
/// last report (`rungs_measurements_unreported_stalls`): on the game's
/// report frames (`rungs_timing_machine_is_report_frame`), and under
/// `RUNGS_POLICY_TRACKING` also on the first frame after a stall, at most
/// every 4 frames, so the master hears of a spike at once. Ask it once per
/// frame, before `rungs_timing_machine_frame_end`; a 1 is remembered as
/// the last report.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if m or out is NULL (nothing is
/// remembered).
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_report_due(
    m: *mut rungs_timing_machine,
    frame: u32,
    unreported_stalls: u32,
    out: *mut i32,
) -> rungs_result {
    unsafe {
        machine_call("rungs_timing_machine_report_due", m, |o| {
            require(out, "out")?;
            let due = o.machine.report_due(frame, unreported_stalls);
            write_to(out, "out", i32::from(due))
        })
    }
}

/// The frame a command issued now is tagged for: on a send frame,
/// `frame + look_ahead`; on other frames a forecast for the next send frame.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if m or out is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_command_tag(
    m: *mut rungs_timing_machine,
    out: *mut u32,
) -> rungs_result {
    unsafe {
        machine_call("rungs_timing_machine_command_tag", m, |o| {
            write_to(out, "out", o.machine.command_tag())
        })
    }
}

/// The timing in force.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if m or out is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_timing(
    m: *mut rungs_timing_machine,
    out: *mut rungs_timing,
) -> rungs_result {
    unsafe {
        machine_call("rungs_timing_machine_timing", m, |o| {
            write_to(out, "out", o.machine.timing().into())
        })
    }
}

/// The frame rate in force.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if m or out is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_fps(
    m: *mut rungs_timing_machine,
    out: *mut u8,
) -> rungs_result {
    unsafe {
        machine_call("rungs_timing_machine_fps", m, |o| {
            write_to(out, "out", o.machine.fps())
        })
    }
}

/// Everything a UI or log shows, in one struct.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if m or out is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_status(
    m: *mut rungs_timing_machine,
    out: *mut rungs_timing_status,
) -> rungs_result {
    unsafe {
        machine_call("rungs_timing_machine_status", m, |o| {
            write_to(out, "out", fill_status(&o.machine))
        })
    }
}

/// The C status of a machine.
pub(crate) fn fill_status(machine: &TimingMachine) -> rungs_timing_status {
    status_to_c(&machine.status(), machine.is_master())
}

/// A status as C sees it.
pub(crate) fn status_to_c(s: &crate::timing::Status, is_master: bool) -> rungs_timing_status {
    let staged = s.staged_target;
    rungs_timing_status {
        frame: s.frame,
        send_period: s.timing.send_period(),
        look_ahead: s.timing.look_ahead(),
        fps: s.fps,
        tier: s.tier as u8,
        target_send_period: s.target.send_period(),
        target_look_ahead: s.target.look_ahead(),
        target_fps: s.target_fps,
        has_staged: u8::from(staged.is_some()),
        staged_send_period: staged.map_or(0, |t| t.send_period()),
        staged_look_ahead: staged.map_or(0, |t| t.look_ahead()),
        master_seat: s.master.unwrap_or(RUNGS_NO_SEAT),
        is_master: u8::from(is_master),
        calibrating: u8::from(s.calibrating),
        qualifying_in_a_row: s.qualifying_in_a_row,
        descent_running: u8::from(s.descent_running),
        last_verdict: verdict_code(s.last_verdict),
    }
}

/// Change the rate the game speed allows (1–255, S6 Speed slider). Call it
/// on every machine on the same frame (when your speed event executes).
///
/// Returns: RUNGS_OK; RUNGS_ERR_INVALID_ARGUMENT if speed_fps is 0;
/// RUNGS_ERR_NULL_POINTER if m is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_machine_set_speed(
    m: *mut rungs_timing_machine,
    speed_fps: u8,
) -> rungs_result {
    unsafe {
        machine_call("rungs_timing_machine_set_speed", m, |o| {
            o.machine
                .set_speed_fps(in_range(speed_fps, 1, 255, "speed_fps")?)
                .map_err(CallError::from)
        })
    }
}
