//! C API of one machine's report measurements (S3): `rungs_measurements`,
//! and the report schedule.

use super::args::{flag, in_range, require, write_out, write_to};
use super::guard::{call, enter_guarded, free_with, Guarded};
use super::report::{check_room, rungs_report, rungs_report_sections, write_report, Sections};
use super::result::{finish, rungs_result, CallError, Result};
use super::session::{lent_measurements_call, rungs_session};
use super::types::seat_or_none;
use crate::error::Error;
use crate::report::{is_report_frame, needed_look_ahead, Measurements, MAX_SEATS};

/// One machine's measurements for its reports (S3): processing time per
/// frame, waits for the other players, round trips to each peer. Opaque;
/// made by `rungs_measurements_new` and released by
/// `rungs_measurements_free`, or lent by an engine session
/// (`rungs_session_measurements`) and released with it.
pub struct rungs_measurements(Source);

/// Whose measurements a handle reaches.
// A lent handle is one per session, so the size its variant wastes is paid
// once per session; boxing the other would cost every call on an own handle
// an indirection.
#[allow(clippy::large_enum_variant)]
enum Source {
    /// Its own, made by `rungs_measurements_new`.
    Own(Guarded<Measurements>),
    /// The session's behind the pointer: the handle lives inside that
    /// session (`rungs_session`), so the pointer is live while the handle
    /// is, and every call enters the session's guard.
    Lent(*const rungs_session),
}

impl rungs_measurements {
    /// The handle a session lends its measurements through.
    pub(crate) fn lent_by(session: *const rungs_session) -> rungs_measurements {
        rungs_measurements(Source::Lent(session))
    }
}

/// The C function `function`'s call on the measurements behind `m`, inside
/// the guard of whoever owns them: the handle's own, or the lending
/// session's (so a lent handle is BUSY, REENTRANT and POISONED exactly when
/// its session is).
///
/// # Safety
/// `m` is NULL or a live handle (its own, or lent by a live session).
unsafe fn measurements_call(
    function: &'static str,
    m: *const rungs_measurements,
    f: impl FnOnce(&mut Measurements) -> Result<()>,
) -> rungs_result {
    if let Err(e) = require(m, "the handle (first argument)") {
        return finish(function, Err(e));
    }
    // SAFETY: non-NULL and live by contract; the source never changes.
    match unsafe { &(*m).0 } {
        Source::Own(guarded) => finish(function, enter_guarded(guarded, f)),
        // SAFETY: a lent handle lives inside its session, which is live.
        Source::Lent(session) => unsafe { lent_measurements_call(function, *session, f) },
    }
}

/// [`measurements_call`] for what the owner of lent measurements does
/// itself: the peers, their round trips and taking the report belong to an
/// engine session (it knows the game's seats and reports on its frames), so
/// a lent handle refuses them with `RUNGS_ERR_STATE`, changing nothing.
///
/// # Safety
/// As [`measurements_call`].
unsafe fn own_measurements_call(
    function: &'static str,
    m: *const rungs_measurements,
    session_does_it: &'static str,
    f: impl FnOnce(&mut Measurements) -> Result<()>,
) -> rungs_result {
    // SAFETY: NULL is left to measurements_call; else live by contract.
    if !m.is_null() && matches!(unsafe { &(*m).0 }, Source::Lent(_)) {
        return finish(
            function,
            Err(
                Error::State("the measurements are lent by an engine session")
                    .detailed(format!(
                        "these measurements are lent by a rungs_session, which {session_does_it} \
                     itself"
                    ))
                    .into(),
            ),
        );
    }
    // SAFETY: forwarded contract.
    unsafe { measurements_call(function, m, f) }
}

/// 1 when each player sends a report on `frame` (32, 64, then every 128:
/// 192, 320, ...; S3), else 0. A game that may run `RUNGS_POLICY_TRACKING`
/// reports on its own cadence: ask `rungs_timing_machine_is_report_frame`.
#[no_mangle]
pub extern "C" fn rungs_is_report_frame(frame: u32) -> u8 {
    u8::from(is_report_frame(frame))
}

/// Make measurements with no peers, at the start of the first report
/// interval; `*out` receives the handle.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if out is NULL; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_new(out: *mut *mut rungs_measurements) -> rungs_result {
    call("rungs_measurements_new", || unsafe {
        require(out, "out")?;
        let own = rungs_measurements(Source::Own(Guarded::new(Measurements::new())));
        // SAFETY: non-NULL (checked) and writable by contract.
        write_out(out, Box::into_raw(Box::new(own)));
        Ok(())
    })
}

/// Release measurements. NULL is accepted; a poisoned object is released
/// too. Measurements a session lends (`rungs_session_measurements`) are
/// refused and stay usable: they are released with their session.
///
/// Returns: RUNGS_OK (also for NULL); RUNGS_ERR_STATE for lent measurements
/// (nothing freed); RUNGS_ERR_BUSY while another thread is in a call on it
/// (not freed); RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_free(
    measurements: *mut rungs_measurements,
) -> rungs_result {
    unsafe {
        free_with("rungs_measurements_free", measurements, |m| match &m.0 {
            Source::Own(guarded) => Ok(guarded),
            Source::Lent(_) => Err(
                Error::State("the measurements are lent by an engine session")
                    .detailed(
                        "these measurements are lent by a rungs_session and are released with it \
                     (rungs_session_free); nothing was freed"
                            .to_string(),
                    )
                    .into(),
            ),
        })
    }
}

/// A frame's work begins at `now_us` (any monotonic microsecond clock).
///
/// Returns: RUNGS_OK; RUNGS_ERR_STATE if a frame's work is already open;
/// RUNGS_ERR_NULL_POINTER if measurements is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_frame_work_begin(
    measurements: *mut rungs_measurements,
    now_us: u64,
) -> rungs_result {
    unsafe {
        measurements_call("rungs_measurements_frame_work_begin", measurements, |m| {
            m.frame_work_begin(now_us).map_err(CallError::from)
        })
    }
}

/// The open frame's work ends at `now_us`; the frame counts toward the
/// average processing time.
///
/// Returns: RUNGS_OK; RUNGS_ERR_STATE if no frame's work is open;
/// RUNGS_ERR_INVALID_ARGUMENT if now_us is before the begin (the frame stays
/// open); RUNGS_ERR_NULL_POINTER if measurements is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_frame_work_end(
    measurements: *mut rungs_measurements,
    now_us: u64,
) -> rungs_result {
    unsafe {
        measurements_call("rungs_measurements_frame_work_end", measurements, |m| {
            m.frame_work_end(now_us).map_err(CallError::from)
        })
    }
}

/// One frame took `duration_us` of processing (instead of begin/end).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if measurements is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_add_frame_work_us(
    measurements: *mut rungs_measurements,
    duration_us: u64,
) -> rungs_result {
    unsafe {
        measurements_call("rungs_measurements_add_frame_work_us", measurements, |m| {
            m.add_frame_work_us(duration_us);
            Ok(())
        })
    }
}

/// The machine starts waiting for the other players at `now_us`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_STATE if a wait is already open;
/// RUNGS_ERR_NULL_POINTER if measurements is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_wait_begin(
    measurements: *mut rungs_measurements,
    now_us: u64,
) -> rungs_result {
    unsafe {
        measurements_call("rungs_measurements_wait_begin", measurements, |m| {
            m.wait_begin(now_us).map_err(CallError::from)
        })
    }
}

/// The machine starts waiting at `now_us` for `seat`'s packet (the detailed
/// report names the seat waited for longest); `RUNGS_NO_SEAT` for no seat in
/// particular, as `rungs_measurements_wait_begin`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_INVALID_ARGUMENT if `seat` is neither 0–15 nor
/// `RUNGS_NO_SEAT`; RUNGS_ERR_STATE if a wait is already open;
/// RUNGS_ERR_NULL_POINTER if measurements is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_wait_begin_for(
    measurements: *mut rungs_measurements,
    now_us: u64,
    seat: u8,
) -> rungs_result {
    unsafe {
        measurements_call("rungs_measurements_wait_begin_for", measurements, |m| {
            let seat = seat_or_none(seat, "seat")?;
            m.wait_begin_for(now_us, seat).map_err(CallError::from)
        })
    }
}

/// The open wait ends at `now_us`. A wait counts in the report interval in
/// which it ends.
///
/// Returns: RUNGS_OK; RUNGS_ERR_STATE if no wait is open;
/// RUNGS_ERR_INVALID_ARGUMENT if now_us is before the begin (the wait stays
/// open); RUNGS_ERR_NULL_POINTER if measurements is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_wait_end(
    measurements: *mut rungs_measurements,
    now_us: u64,
) -> rungs_result {
    unsafe {
        measurements_call("rungs_measurements_wait_end", measurements, |m| {
            m.wait_end(now_us).map_err(CallError::from)
        })
    }
}

/// One wait for the other players lasted `duration_us` (instead of begin/end).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if measurements is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_add_wait_us(
    measurements: *mut rungs_measurements,
    duration_us: u64,
) -> rungs_result {
    unsafe {
        measurements_call("rungs_measurements_add_wait_us", measurements, |m| {
            m.add_wait_us(duration_us);
            Ok(())
        })
    }
}

/// One wait for `seat`'s packet lasted `duration_us` (instead of
/// `rungs_measurements_wait_begin_for` / `_wait_end`); `RUNGS_NO_SEAT` for
/// no seat in particular, as `rungs_measurements_add_wait_us`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_INVALID_ARGUMENT if `seat` is neither 0–15 nor
/// `RUNGS_NO_SEAT` (nothing counted); RUNGS_ERR_NULL_POINTER if measurements is
/// NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_add_wait_for_us(
    measurements: *mut rungs_measurements,
    duration_us: u64,
    seat: u8,
) -> rungs_result {
    unsafe {
        measurements_call("rungs_measurements_add_wait_for_us", measurements, |m| {
            let seat = seat_or_none(seat, "seat")?;
            m.add_wait_for_us(duration_us, seat);
            Ok(())
        })
    }
}

/// The look-ahead a frame needed, into `*out` (1–250): it ran with its
/// turns (the peers' packets of one send frame) sent `look_ahead` frames
/// before it, the last of them arrived at `ready_us`, and it could have
/// started until `deadline_us` without counting as a stall (when it was
/// due, or a frame period after the frame before started, whichever is
/// later); `frame_us` is a frame period. Ready `k` whole frame periods
/// before its deadline, it needed `k` frames less; after it (it stalled),
/// a frame more for each frame period or part of one it waited
/// (docs/tracking.md, rule 10). Any one microsecond clock for both times.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if out is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if `look_ahead` is not 1–250 or `frame_us` is
/// 0; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_needed_look_ahead(
    look_ahead: u8,
    deadline_us: u64,
    ready_us: u64,
    frame_us: u64,
    out: *mut u8,
) -> rungs_result {
    super::guard::call("rungs_needed_look_ahead", || {
        require(out, "out")?;
        let needed = needed_look_ahead(look_ahead, deadline_us, ready_us, frame_us)?;
        unsafe { write_to(out, "out", needed) }
    })
}

/// A frame ran with its turns sent `look_ahead` frames before it and
/// needed `needed` frames of look-ahead (`rungs_needed_look_ahead`). The
/// report of the interval carries how many of its frames needed more than
/// each of the four look-aheads from the last frame's down
/// (the needs section, `rungs_measurements_take_report` with
/// `RUNGS_REPORT_NEEDS`).
///
/// Returns: RUNGS_OK; RUNGS_ERR_INVALID_ARGUMENT if `look_ahead` or `needed` is
/// not 1–250 (nothing counted); RUNGS_ERR_NULL_POINTER if measurements is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_add_frame_need(
    measurements: *mut rungs_measurements,
    look_ahead: u8,
    needed: u8,
) -> rungs_result {
    unsafe {
        measurements_call("rungs_measurements_add_frame_need", measurements, |m| {
            m.add_frame_need(look_ahead, needed)
                .map_err(CallError::from)
        })
    }
}

/// Start measuring round trips to `peer` (a seat). Reports carry no round
/// trip until it has a clean sample (S3).
///
/// Returns: RUNGS_OK; RUNGS_ERR_INVALID_ARGUMENT if peer is not a seat (0 to
/// 15); RUNGS_ERR_STATE if peer is already measured, or the measurements are
/// lent by a session (which manages the peers); RUNGS_ERR_NULL_POINTER if
/// measurements is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_add_peer(
    measurements: *mut rungs_measurements,
    peer: u8,
) -> rungs_result {
    unsafe {
        own_measurements_call(
            "rungs_measurements_add_peer",
            measurements,
            "adds and removes the peers",
            |m| {
                m.add_peer(in_range(peer, 0, MAX_SEATS as u8 - 1, "peer")?)
                    .map_err(CallError::from)
            },
        )
    }
}

/// Stop measuring `peer` (it left the game).
///
/// Returns: RUNGS_OK; RUNGS_ERR_UNKNOWN_SEAT if peer is not measured
/// (`rungs_measurements_add_peer`); RUNGS_ERR_STATE if the measurements are
/// lent by a session; RUNGS_ERR_NULL_POINTER if measurements is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_remove_peer(
    measurements: *mut rungs_measurements,
    peer: u8,
) -> rungs_result {
    unsafe {
        own_measurements_call(
            "rungs_measurements_remove_peer",
            measurements,
            "adds and removes the peers",
            |m| m.remove_peer(peer).map_err(CallError::from),
        )
    }
}

/// A round-trip sample of `rtt_ms` to `peer`. `clean` is 1 when the sample
/// comes from a packet sent once, 0 when it was retransmitted (S8); an
/// unclean sample never replaces the link's measured value, so a
/// retransmitting link keeps contributing its last one (S3).
///
/// Returns: RUNGS_OK; RUNGS_ERR_INVALID_ARGUMENT if clean is neither 0 nor 1;
/// RUNGS_ERR_UNKNOWN_SEAT if peer is not measured
/// (`rungs_measurements_add_peer`); RUNGS_ERR_STATE if the measurements are
/// lent by a session (use `rungs_session_rtt_sample`);
/// RUNGS_ERR_NULL_POINTER if measurements is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_add_rtt_sample(
    measurements: *mut rungs_measurements,
    peer: u8,
    rtt_ms: u32,
    clean: u8,
) -> rungs_result {
    unsafe {
        own_measurements_call(
            "rungs_measurements_add_rtt_sample",
            measurements,
            "takes the round trips (rungs_session_rtt_sample, _rtt_sample_ticks, _sample_links)",
            |m| {
                let clean = flag(clean, "clean")?;
                m.add_rtt_sample(peer, rtt_ms, clean)
                    .map_err(CallError::from)
            },
        )
    }
}

/// A round trip to `peer` of `ticks` whole ticks of a `tick_hz` timer (60
/// for Tiberian Sun and Red Alert), as those engines time one: from a
/// packet's first send to its acknowledgement. `resent` is 1 when the packet
/// went out more than once: the sample is then not clean (S8) and never
/// replaces the link's measured value; 0 when it went out once.
///
/// Returns: RUNGS_OK; RUNGS_ERR_INVALID_ARGUMENT if `tick_hz` is 0 or `resent`
/// is neither 0 nor 1; RUNGS_ERR_UNKNOWN_SEAT if peer is not measured;
/// RUNGS_ERR_STATE if the measurements are lent by a session (use
/// `rungs_session_rtt_sample_ticks`); RUNGS_ERR_NULL_POINTER if measurements
/// is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_add_rtt_ticks(
    measurements: *mut rungs_measurements,
    peer: u8,
    ticks: u32,
    tick_hz: u8,
    resent: u8,
) -> rungs_result {
    unsafe {
        own_measurements_call(
            "rungs_measurements_add_rtt_ticks",
            measurements,
            "takes the round trips (rungs_session_rtt_sample, _rtt_sample_ticks, _sample_links)",
            |m| {
                let timer = tick_timer(tick_hz)?;
                m.add_rtt_ticks(peer, ticks, timer, flag(resent, "resent")?)
                    .map_err(CallError::from)
            },
        )
    }
}

/// One frame's work spanned `ticks` whole ticks of a `tick_hz` timer, as a
/// tick-counting engine measures its processing time (instead of
/// `rungs_measurements_add_frame_work_us`).
///
/// Returns: RUNGS_OK; RUNGS_ERR_INVALID_ARGUMENT if `tick_hz` is 0;
/// RUNGS_ERR_NULL_POINTER if measurements is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_add_frame_ticks(
    measurements: *mut rungs_measurements,
    ticks: u32,
    tick_hz: u8,
) -> rungs_result {
    unsafe {
        measurements_call("rungs_measurements_add_frame_ticks", measurements, |m| {
            m.add_frame_ticks(ticks, tick_timer(tick_hz)?);
            Ok(())
        })
    }
}

/// The timer of `tick_hz` ticks a second, refused for 0 naming the argument.
fn tick_timer(tick_hz: u8) -> super::result::Result<crate::timing::TickTimer> {
    crate::timing::TickTimer::new(tick_hz)
        .map_err(|_| {
            crate::Error::invalid_value("tick_hz", 0u8, "the timer's ticks per second, 1 to 255")
        })
        .map_err(CallError::from)
}

/// The stalled frames (waits) measured since the last report, into `*out`:
/// what `rungs_timing_machine_report_due` asks for.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if measurements or out is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_unreported_stalls(
    measurements: *mut rungs_measurements,
    out: *mut u32,
) -> rungs_result {
    unsafe {
        measurements_call("rungs_measurements_unreported_stalls", measurements, |m| {
            require(out, "out")?;
            write_out(out, m.unreported_stalls());
            Ok(())
        })
    }
}

/// The report for the interval now ending, into `*out`, with the sections
/// `sections` asks for (`RUNGS_REPORT_DETAIL`, `RUNGS_REPORT_NEEDS` with
/// it, or 0 for the basic report); the next interval starts. Call it on
/// report frames (`rungs_is_report_frame`; with a timing machine, when
/// `rungs_timing_machine_report_due` says so) and queue the report as a
/// NETWORK_REPORT event (`rungs_report_payload_encode` writes the layout
/// its sections need) or execute it (`rungs_timing_machine_execute_report`).
/// Set `out->struct_size` first (`rungs_report_init`). The needs section
/// has reference 0 when no frame's need was passed
/// (`rungs_measurements_add_frame_need`). A report with sections always
/// keeps their rules (`rungs_report_detail`, `rungs_look_ahead_needs`).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if measurements or out is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if sections has other bits or the needs
/// without the detail, or out->struct_size cannot hold what is asked for;
/// RUNGS_ERR_STATE if the measurements are lent by a session (which takes
/// its reports itself). The interval ends only on RUNGS_OK.
#[no_mangle]
pub unsafe extern "C" fn rungs_measurements_take_report(
    measurements: *mut rungs_measurements,
    sections: rungs_report_sections,
    out: *mut rungs_report,
) -> rungs_result {
    unsafe {
        own_measurements_call(
            "rungs_measurements_take_report",
            measurements,
            "takes the reports",
            |m| {
                let sections = Sections::from_bits(sections, "sections")?;
                check_room(out, "out", sections)?;
                write_report(out, "out", &m.take_report(), sections)
            },
        )
    }
}
