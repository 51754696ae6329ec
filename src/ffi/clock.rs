//! C API of clock synchronisation and frame pacing (S9): `rungs_clock`
//! (offset to a reference clock, slewed) and `rungs_pacer` (when the next
//! frame is due). The two are separate objects so an engine that is itself
//! the reference uses only a pacer. Times are microseconds.

use super::args::{in_range, read_config, read_in, require, write_out, write_to};
use super::guard::{call, free_call, hand_out, object_call, Guarded, Handle};
use super::result::{rungs_result, CallError};
use crate::clock::{
    ClockSample, ClockSync, ClockSyncConfig, FramePacer, PacerConfig, DEFAULT_MAX_NUDGE_PERMILLE,
    DEFAULT_MAX_SLEW_PPM, DEFAULT_SAMPLE_WINDOW, MAX_NUDGE_PERMILLE, MAX_SAMPLE_WINDOW,
    MAX_SLEW_PPM,
};
use crate::error::Error;

/// Default `sample_window` of `rungs_clock_config`.
pub const RUNGS_CLOCK_DEFAULT_SAMPLE_WINDOW: u32 = 16;
/// Largest `sample_window` of `rungs_clock_config`.
pub const RUNGS_CLOCK_MAX_SAMPLE_WINDOW: u32 = 64;
/// Default `max_slew_ppm` of `rungs_clock_config`: 5 %.
pub const RUNGS_CLOCK_DEFAULT_MAX_SLEW_PPM: u32 = 50_000;
/// Largest `max_slew_ppm` of `rungs_clock_config`: 50 %.
pub const RUNGS_CLOCK_MAX_SLEW_PPM: u32 = 500_000;
/// Default `max_nudge_permille` of `rungs_pacer_config`: ±10 % of a frame.
pub const RUNGS_PACER_DEFAULT_MAX_NUDGE_PERMILLE: u16 = 100;
/// Largest `max_nudge_permille` of `rungs_pacer_config`: ±50 %.
pub const RUNGS_PACER_MAX_NUDGE_PERMILLE: u16 = 500;

// Literals for cbindgen; they must agree with the Rust API.
const _: () = assert!(RUNGS_CLOCK_DEFAULT_SAMPLE_WINDOW as usize == DEFAULT_SAMPLE_WINDOW);
const _: () = assert!(RUNGS_CLOCK_MAX_SAMPLE_WINDOW as usize == MAX_SAMPLE_WINDOW);
const _: () = assert!(RUNGS_CLOCK_DEFAULT_MAX_SLEW_PPM == DEFAULT_MAX_SLEW_PPM);
const _: () = assert!(RUNGS_CLOCK_MAX_SLEW_PPM == MAX_SLEW_PPM);
const _: () = assert!(RUNGS_PACER_DEFAULT_MAX_NUDGE_PERMILLE == DEFAULT_MAX_NUDGE_PERMILLE);
const _: () = assert!(RUNGS_PACER_MAX_NUDGE_PERMILLE == MAX_NUDGE_PERMILLE);

/// Settings of a `rungs_clock`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rungs_clock_config {
    /// `sizeof(rungs_clock_config)`, so the struct can grow without breaking
    /// old callers.
    pub struct_size: u32,
    /// Samples the offset filter keeps, 1–`RUNGS_CLOCK_MAX_SAMPLE_WINDOW`;
    /// 0: `RUNGS_CLOCK_DEFAULT_SAMPLE_WINDOW`.
    pub sample_window: u32,
    /// Most the clock slews, in millionths of elapsed local time,
    /// 1–`RUNGS_CLOCK_MAX_SLEW_PPM`; 0: `RUNGS_CLOCK_DEFAULT_MAX_SLEW_PPM`.
    pub max_slew_ppm: u32,
}

/// One request/reply exchange with the reference clock, µs: `t0` local send,
/// `t1` reference receive, `t2` reference send, `t3` local receive.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rungs_clock_sample {
    /// Local time the request left.
    pub t0: i64,
    /// Reference time the request arrived.
    pub t1: i64,
    /// Reference time the reply left.
    pub t2: i64,
    /// Local time the reply arrived.
    pub t3: i64,
}

/// The filtered offset estimate of a `rungs_clock`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rungs_offset_estimate {
    /// Reference minus local time, µs: the mean offset of the samples kept.
    pub offset_us: i64,
    /// Median round trip of the samples held, µs.
    pub median_round_trip_us: i64,
    /// Samples the filter kept (those at most one standard deviation above
    /// the median round trip).
    pub samples_kept: u32,
    /// Samples held in the window.
    pub samples_held: u32,
}

/// Settings of a `rungs_pacer`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rungs_pacer_config {
    /// `sizeof(rungs_pacer_config)`.
    pub struct_size: u32,
    /// The reference point's frame; also the first frame due.
    pub reference_frame: u32,
    /// Reference time (µs) at which `reference_frame` ideally starts.
    pub reference_start_us: i64,
    /// Most a deadline moves toward the shared schedule, in thousandths of
    /// a frame period, 0–`RUNGS_PACER_MAX_NUDGE_PERMILLE`. 0 is a real
    /// value, no nudging (a pacer that keeps its own schedule), not the
    /// default: `rungs_pacer_config_init` writes
    /// `RUNGS_PACER_DEFAULT_MAX_NUDGE_PERMILLE`.
    pub max_nudge_permille: u16,
    /// The frame rate in force, 1–255.
    pub fps: u8,
}

/// Synchronisation to a reference clock (the relay or the master, S9):
/// filtered offset estimate, slewed so reference time never jumps or runs
/// backwards. Opaque; `rungs_clock_new` / `rungs_clock_free`.
pub struct rungs_clock(Guarded<ClockSync>);

/// Frame pacing (S9): when the next frame is due at the rate in force,
/// nudged toward the schedule every machine shares. Opaque;
/// `rungs_pacer_new` / `rungs_pacer_free`.
pub struct rungs_pacer(Guarded<FramePacer>);

impl Handle for rungs_clock {
    type State = ClockSync;
    fn guarded(&self) -> &Guarded<ClockSync> {
        &self.0
    }
}

impl Handle for rungs_pacer {
    type State = FramePacer;
    fn guarded(&self) -> &Guarded<FramePacer> {
        &self.0
    }
}

/// Fill `config` with the defaults: `struct_size` set,
/// `RUNGS_CLOCK_DEFAULT_SAMPLE_WINDOW` samples and
/// `RUNGS_CLOCK_DEFAULT_MAX_SLEW_PPM`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if config is NULL; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_clock_config_init(config: *mut rungs_clock_config) -> rungs_result {
    call("rungs_clock_config_init", || {
        let defaults = rungs_clock_config {
            struct_size: std::mem::size_of::<rungs_clock_config>() as u32,
            sample_window: RUNGS_CLOCK_DEFAULT_SAMPLE_WINDOW,
            max_slew_ppm: RUNGS_CLOCK_DEFAULT_MAX_SLEW_PPM,
        };
        // SAFETY: NULL (refused) or valid for writes by the caller's contract.
        unsafe { write_to(config, "config", defaults) }
    })
}

/// `value`, or `default` for a 0: a zeroed config field means the default.
fn or_default(value: u32, default: u32) -> u32 {
    if value == 0 {
        default
    } else {
        value
    }
}

/// Make a clock with no samples yet; `*out` receives the handle.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if config or out is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if config->struct_size is smaller than
/// `sizeof(rungs_clock_config)`, config->sample_window is above
/// `RUNGS_CLOCK_MAX_SAMPLE_WINDOW`, or config->max_slew_ppm is above
/// `RUNGS_CLOCK_MAX_SLEW_PPM` (0 is the default for either); RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_clock_new(
    config: *const rungs_clock_config,
    out: *mut *mut rungs_clock,
) -> rungs_result {
    call("rungs_clock_new", || {
        require(out, "out")?;
        // SAFETY: read_config checks NULL and struct_size before reading the rest.
        let config = unsafe { read_config(config, "config") }?;
        let sync = ClockSync::new(ClockSyncConfig {
            sample_window: or_default(
                in_range(
                    config.sample_window,
                    0,
                    RUNGS_CLOCK_MAX_SAMPLE_WINDOW,
                    "config->sample_window",
                )?,
                RUNGS_CLOCK_DEFAULT_SAMPLE_WINDOW,
            ) as usize,
            max_slew_ppm: or_default(
                in_range(
                    config.max_slew_ppm,
                    0,
                    RUNGS_CLOCK_MAX_SLEW_PPM,
                    "config->max_slew_ppm",
                )?,
                RUNGS_CLOCK_DEFAULT_MAX_SLEW_PPM,
            ),
        })?;
        unsafe { hand_out(out, rungs_clock(Guarded::new(sync))) }
    })
}

/// Release a clock. NULL is accepted; a poisoned object is released too.
///
/// Returns: RUNGS_OK (also for NULL); RUNGS_ERR_BUSY while another thread is in
/// a call on it (not freed); RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_clock_free(clock: *mut rungs_clock) -> rungs_result {
    unsafe { free_call("rungs_clock_free", clock) }
}

/// Add an exchange, completed at local time `local_now_us` (normally its
/// `t3`), and steer toward the new estimate. Before reference time is first
/// read the estimate applies at once; after, it is slewed in.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if clock or sample is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if the timestamps contradict each other, the
/// round trip is over 60 s, or local_now_us is earlier than a previous call's
/// (the sample is not kept).
#[no_mangle]
pub unsafe extern "C" fn rungs_clock_add_sample(
    clock: *mut rungs_clock,
    sample: *const rungs_clock_sample,
    local_now_us: i64,
) -> rungs_result {
    unsafe {
        object_call("rungs_clock_add_sample", clock, |sync| {
            let s = read_in(sample, "sample")?;
            let sample = ClockSample::new(s.t0, s.t1, s.t2, s.t3)?;
            sync.add_sample(sample, local_now_us)
                .map(drop)
                .map_err(CallError::from)
        })
    }
}

/// The filtered offset estimate, into `*out`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if clock or out is NULL;
/// RUNGS_ERR_STATE if no sample was added yet.
#[no_mangle]
pub unsafe extern "C" fn rungs_clock_estimate(
    clock: *mut rungs_clock,
    out: *mut rungs_offset_estimate,
) -> rungs_result {
    unsafe {
        object_call("rungs_clock_estimate", clock, |sync| {
            require(out, "out")?;
            let estimate = sync.estimate().ok_or(Error::State(
                "no clock sample yet (add one with rungs_clock_add_sample)",
            ))?;
            write_out(
                out,
                rungs_offset_estimate {
                    offset_us: estimate.offset_us,
                    median_round_trip_us: estimate.median_round_trip_us,
                    // At most MAX_SAMPLE_WINDOW (64).
                    samples_kept: estimate.samples_kept as u32,
                    samples_held: estimate.samples_held as u32,
                },
            );
            Ok(())
        })
    }
}

/// Reference time at local time `local_now_us`, into `*out_reference_us`:
/// never earlier than a previous reading, never a jump.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if clock or out_reference_us is
/// NULL; RUNGS_ERR_STATE if no sample was added yet; RUNGS_ERR_INVALID_ARGUMENT
/// if local_now_us is earlier than a previous call's.
#[no_mangle]
pub unsafe extern "C" fn rungs_clock_reference_time(
    clock: *mut rungs_clock,
    local_now_us: i64,
    out_reference_us: *mut i64,
) -> rungs_result {
    unsafe {
        object_call("rungs_clock_reference_time", clock, |sync| {
            require(out_reference_us, "out_reference_us")?;
            let reference = sync.reference_time(local_now_us)?;
            write_out(out_reference_us, reference);
            Ok(())
        })
    }
}

/// Fill `config` with the defaults: `struct_size` set, reference frame 0 at
/// time 0, `RUNGS_PACER_DEFAULT_MAX_NUDGE_PERMILLE` (a zeroed struct says 0:
/// no nudging at all), and `fps` 0, which `rungs_pacer_new` refuses: set the
/// frame rate in force.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if config is NULL; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_pacer_config_init(config: *mut rungs_pacer_config) -> rungs_result {
    call("rungs_pacer_config_init", || {
        let defaults = rungs_pacer_config {
            struct_size: std::mem::size_of::<rungs_pacer_config>() as u32,
            reference_frame: 0,
            reference_start_us: 0,
            max_nudge_permille: RUNGS_PACER_DEFAULT_MAX_NUDGE_PERMILLE,
            fps: 0,
        };
        // SAFETY: NULL (refused) or valid for writes by the caller's contract.
        unsafe { write_to(config, "config", defaults) }
    })
}

/// Make a pacer; the first frame due is `config->reference_frame` at
/// `config->reference_start_us`. `*out` receives the handle.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if config or out is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if config->struct_size is smaller than
/// `sizeof(rungs_pacer_config)`, config->fps is 0, or
/// config->max_nudge_permille is above `RUNGS_PACER_MAX_NUDGE_PERMILLE`;
/// RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_pacer_new(
    config: *const rungs_pacer_config,
    out: *mut *mut rungs_pacer,
) -> rungs_result {
    call("rungs_pacer_new", || {
        require(out, "out")?;
        // SAFETY: read_config checks NULL and struct_size before reading the rest.
        let config = unsafe { read_config(config, "config") }?;
        let pacer = FramePacer::new(PacerConfig {
            fps: in_range(config.fps, 1, 255, "config->fps")?,
            reference_frame: config.reference_frame,
            reference_start_us: config.reference_start_us,
            max_nudge_permille: in_range(
                config.max_nudge_permille,
                0,
                RUNGS_PACER_MAX_NUDGE_PERMILLE,
                "config->max_nudge_permille",
            )?,
        })?;
        unsafe { hand_out(out, rungs_pacer(Guarded::new(pacer))) }
    })
}

/// Release a pacer. NULL is accepted; a poisoned object is released too.
///
/// Returns: RUNGS_OK (also for NULL); RUNGS_ERR_BUSY while another thread is in
/// a call on it (not freed); RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_pacer_free(pacer: *mut rungs_pacer) -> rungs_result {
    unsafe { free_call("rungs_pacer_free", pacer) }
}

/// The next frame, into `*out_frame`, and the reference time (µs) at which
/// to start it, into `*out_due_us`. The deadline is fixed when the frame
/// before it starts: later calls return the same until the next
/// `rungs_pacer_frame_started`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if pacer, out_frame or out_due_us
/// is NULL (neither written).
#[no_mangle]
pub unsafe extern "C" fn rungs_pacer_next_frame_due(
    pacer: *mut rungs_pacer,
    out_frame: *mut u32,
    out_due_us: *mut i64,
) -> rungs_result {
    unsafe {
        object_call("rungs_pacer_next_frame_due", pacer, |pacer| {
            require(out_frame, "out_frame")?;
            require(out_due_us, "out_due_us")?;
            let due = pacer.next_frame_due();
            write_out(out_frame, due.frame);
            write_out(out_due_us, due.due_us);
            Ok(())
        })
    }
}

/// The engine started `frame` at reference time `now_us`; fixes the next
/// frame's deadline (one period on, nudged by at most the configured bound
/// toward the shared schedule). The first call may name any frame, later
/// ones the frame after the previous one.
///
/// Returns: RUNGS_OK; RUNGS_ERR_STATE if frame is not the frame after the
/// previous call's (no effect); RUNGS_ERR_NULL_POINTER if pacer is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_pacer_frame_started(
    pacer: *mut rungs_pacer,
    frame: u32,
    now_us: i64,
) -> rungs_result {
    unsafe {
        object_call("rungs_pacer_frame_started", pacer, |pacer| {
            pacer.frame_started(frame, now_us).map_err(CallError::from)
        })
    }
}

/// The frame rate becomes `fps` from frame `from_frame` on (when the timing
/// event or its staged decrease takes effect, S5); every machine calls it
/// for the same frame, normally while that frame runs. The deadline already
/// given is kept.
///
/// Returns: RUNGS_OK; RUNGS_ERR_INVALID_ARGUMENT if fps is 0; RUNGS_ERR_STATE
/// if from_frame is before the latest rate change or after the next frame due;
/// RUNGS_ERR_NULL_POINTER if pacer is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_pacer_set_fps(
    pacer: *mut rungs_pacer,
    fps: u8,
    from_frame: u32,
) -> rungs_result {
    unsafe {
        object_call("rungs_pacer_set_fps", pacer, |pacer| {
            pacer
                .set_fps(in_range(fps, 1, 255, "fps")?, from_frame)
                .map_err(CallError::from)
        })
    }
}

/// A new reference point: `frame` ideally starts at reference time
/// `start_us` (the master's or relay's announcement, at the rate in force).
///
/// Returns: RUNGS_OK; RUNGS_ERR_STATE if frame is before the latest rate
/// change; RUNGS_ERR_NULL_POINTER if pacer is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_pacer_set_reference(
    pacer: *mut rungs_pacer,
    frame: u32,
    start_us: i64,
) -> rungs_result {
    unsafe {
        object_call("rungs_pacer_set_reference", pacer, |pacer| {
            pacer
                .set_reference(frame, start_us)
                .map_err(CallError::from)
        })
    }
}

/// When `frame` ideally starts on the shared schedule, into `*out_start_us`
/// (what a master or relay announces as a reference point).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if pacer or out_start_us is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_pacer_ideal_start(
    pacer: *mut rungs_pacer,
    frame: u32,
    out_start_us: *mut i64,
) -> rungs_result {
    unsafe {
        object_call("rungs_pacer_ideal_start", pacer, |pacer| {
            write_to(out_start_us, "out_start_us", pacer.ideal_start_us(frame))
        })
    }
}
