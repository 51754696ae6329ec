//! `rungs_session`: adaptive timing inside an engine that keeps its own
//! transport, event queue and event IDs (S3, S5, S7). See
//! `session::engine` for the frame loop.

use std::ffi::c_void;

use super::guard::{
    catch, free_object, hand_out, require, with_object, write_out, Guarded, Handle,
};
use super::payload::report_layout;
use super::result::rungs_result;
use super::timing_machine::{
    deliver_output, fill_status, rungs_timing_callbacks, rungs_timing_status,
};
use super::types::{human_seats, read_config, RUNGS_NO_SEAT};
use crate::error::Error;
use crate::session::{EngineSession, EventIds, SessionConfig, SessionOutput};
use crate::timing::MachineConfig;
use crate::wire::events::TimingLayout;

/// No event ID for an optional role (LATENCYFUDGE).
pub const RUNGS_NO_EVENT_ID: u16 = 0xFFFF;

/// Log level of an error.
pub const RUNGS_LOG_ERROR: u8 = 0;
/// Log level of a warning (e.g. a refused event).
pub const RUNGS_LOG_WARN: u8 = 1;
/// Log level of information (timing decisions, removals).
pub const RUNGS_LOG_INFO: u8 = 2;
/// Log level of debugging detail.
pub const RUNGS_LOG_DEBUG: u8 = 3;

/// Queue an event of `type_id` with `len` payload bytes into your own network
/// stream, from your seat; it goes out with your next packet. `payload` lives
/// until the callback returns.
pub type rungs_queue_event_fn = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        frame: u32,
        type_id: u8,
        payload: *const u8,
        len: usize,
    ),
>;
/// Send frame: flush your packet now, stamping every event collected since
/// the previous send frame (yours and the queued ones) with `tag` (S5).
pub type rungs_send_frame_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, frame: u32, tag: u32)>;
/// Pace at `fps` from `frame` (also on frame 0).
pub type rungs_set_frame_rate_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, frame: u32, fps: u8)>;
/// Show `text` in the message list (S6).
pub type rungs_session_message_fn = Option<
    unsafe extern "C" fn(user: *mut c_void, frame: u32, tier: u8, text: *const libc::c_char),
>;
/// The master is now `seat` (`RUNGS_NO_SEAT` when no human is left).
pub type rungs_session_master_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, frame: u32, seat: u8)>;
/// The timing in force changed (also on frame 0).
pub type rungs_session_timing_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, frame: u32, send_period: u8, look_ahead: u8)>;
/// A log line (`RUNGS_LOG_*`); `text` lives until the callback returns.
pub type rungs_log_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, level: u8, text: *const libc::c_char)>;

/// The session's callbacks, each optional (NULL). They run synchronously on
/// the calling thread inside the call that caused them; calling back into
/// the same session from one returns `RUNGS_ERR_REENTRANT`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rungs_session_callbacks {
    /// Passed first to every callback.
    pub user: *mut c_void,
    pub queue_event: super::types::rungs_queue_event_fn,
    pub send_frame: super::types::rungs_send_frame_fn,
    pub set_frame_rate: super::types::rungs_frame_rate_changed_fn,
    pub player_message: super::types::rungs_player_message_fn,
    pub master_changed: super::types::rungs_seat_event_fn,
    pub timing_changed: super::types::rungs_timing_changed_fn,
    pub log: super::types::rungs_log_fn,
}

/// How to set up a session.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rungs_session_config {
    /// `sizeof(rungs_session_config)`.
    pub struct_size: u32,
    /// The rate the game speed allows, 1–255 (S4.2).
    pub speed_fps: u8,
    /// Seats in house order, 1–16.
    pub seat_count: u8,
    /// This machine's seat (a human seat), or `RUNGS_NO_SEAT` to follow a
    /// recording without reporting or sending.
    pub local_seat: u8,
    /// `RUNGS_REPORT_LAYOUT_COMPACT` or `RUNGS_REPORT_LAYOUT_EXTENDED`.
    pub report_layout: u8,
    /// Bit `i` set: seat `i` is a human player.
    pub human_seat_mask: u32,
    /// Your TIMING event ID, 0–255 (31 in Tiberian Sun, 29 in Red Alert).
    pub timing_event_id: u16,
    /// Your NETWORK_REPORT event ID, 0–255 (36 in OpenTS).
    pub network_report_event_id: u16,
    /// Your LATENCYFUDGE event ID (35 in Tiberian Sun) or `RUNGS_NO_EVENT_ID`.
    pub latency_fudge_event_id: u16,
    /// Added to MaxAhead in TIMING payloads and removed on receipt:
    /// `RUNGS_TS_FOG_BIAS` (10) for an engine keeping vanilla TS's fog-of-war
    /// quirk while fog is on, else 0 (`docs/payloads.md`).
    pub timing_fog_bias: u8,
    /// Must be 0.
    pub reserved: u8,
    pub callbacks: rungs_session_callbacks,
}

/// The session and the engine's callbacks.
pub struct SessionObject {
    session: EngineSession,
    callbacks: rungs_session_callbacks,
}

/// An opaque engine session, made by `rungs_session_new`.
pub struct rungs_session(Guarded<SessionObject>);

impl Handle for rungs_session {
    type State = SessionObject;
    fn guarded(&self) -> &Guarded<SessionObject> {
        &self.0
    }
}

impl SessionObject {
    fn deliver(&mut self) {
        let cb = self.callbacks;
        while let Some(output) = self.session.poll_output() {
            // SAFETY: function pointers and user pointer come from the engine
            // for exactly this use; NULL callbacks are skipped. Pointers
            // passed in live until the callback returns.
            unsafe {
                match output {
                    SessionOutput::QueueEvent {
                        frame,
                        type_id,
                        payload,
                    } => {
                        if let Some(f) = cb.queue_event {
                            let bytes = payload.as_bytes();
                            f(cb.user, frame, type_id, bytes.as_ptr(), bytes.len());
                        }
                    }
                    SessionOutput::SendFrame { frame, tag } => {
                        if let Some(f) = cb.send_frame {
                            f(cb.user, frame, tag);
                        }
                    }
                    SessionOutput::Timing(output) => {
                        let timing_callbacks = rungs_timing_callbacks {
                            user: cb.user,
                            timing_changed: cb.timing_changed,
                            frame_rate_changed: cb.set_frame_rate,
                            player_message: cb.player_message,
                            master_changed: cb.master_changed,
                        };
                        deliver_output(&timing_callbacks, output);
                    }
                    SessionOutput::Log { level, text } => {
                        if let Some(f) = cb.log {
                            let mut line = [0u8; 161];
                            let bytes = text.as_str().as_bytes();
                            line[..bytes.len()].copy_from_slice(bytes);
                            f(cb.user, level as u8, line.as_ptr().cast());
                        }
                    }
                }
            }
        }
    }
}

unsafe fn with_session(
    s: *const rungs_session,
    f: impl FnOnce(&mut EngineSession) -> crate::Result<()>,
) -> rungs_result {
    // SAFETY: NULL or a live session (caller contract); the guard checks NULL.
    unsafe {
        with_object(s, |object| {
            let result = f(&mut object.session);
            object.deliver();
            result
        })
    }
}

fn event_id(value: u16, role: &'static str) -> crate::Result<u8> {
    u8::try_from(value).map_err(|_| Error::InvalidArgument(role))
}

fn session_config(c: &rungs_session_config) -> crate::Result<SessionConfig> {
    if c.reserved != 0 {
        return Err(Error::InvalidArgument("reserved must be 0"));
    }
    let human_seats = human_seats(c.seat_count, c.human_seat_mask)?;
    let report_layout = report_layout(c.report_layout)?;
    let latency_fudge = match c.latency_fudge_event_id {
        RUNGS_NO_EVENT_ID => None,
        id => Some(event_id(
            id,
            "latency_fudge_event_id must be 0..=255 or RUNGS_NO_EVENT_ID",
        )?),
    };
    Ok(SessionConfig {
        machine: MachineConfig::adaptive(
            c.speed_fps,
            human_seats,
            (c.local_seat != RUNGS_NO_SEAT).then_some(c.local_seat),
        ),
        ids: EventIds {
            timing: event_id(c.timing_event_id, "timing_event_id must be 0..=255")?,
            network_report: event_id(
                c.network_report_event_id,
                "network_report_event_id must be 0..=255",
            )?,
            latency_fudge,
        },
        timing_layout: TimingLayout::TiberianSun {
            fog_bias: c.timing_fog_bias,
        },
        report_layout,
    })
}

/// Make a session for the eve of frame 0. Refused with
/// `RUNGS_ERR_INVALID_ARGUMENT` when two roles share an event ID, an ID is
/// above 255, or the seats are invalid. `*out` is written only on success.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_new(
    config: *const rungs_session_config,
    out: *mut *mut rungs_session,
) -> rungs_result {
    catch(|| {
        require(out, "out")?;
        // SAFETY: read_config checks NULL and struct_size before reading the rest.
        let config = unsafe { read_config(config, "config")? };
        let session = EngineSession::new(&session_config(&config)?)?;
        let object = SessionObject {
            session,
            callbacks: config.callbacks,
        };
        // SAFETY: `out` is NULL (refused) or writable.
        unsafe { hand_out(out, rungs_session(Guarded::new(object))) }
    })
}

/// Release a session. NULL is accepted; refused from inside its callbacks.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_free(s: *mut rungs_session) -> rungs_result {
    // SAFETY: NULL or a live session from `_new`.
    unsafe { free_object(s) }
}

/// Start `frame` (0, 1, 2, ... without gaps). `*out_executes_commands` (may
/// be NULL) is 1 when this frame executes commands: execute every queued
/// event tagged at or before it, in (tag, seat, issue order), handing rungs'
/// events to `rungs_session_event_executed`.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_frame_begin(
    s: *mut rungs_session,
    frame: u32,
    out_executes_commands: *mut i32,
) -> rungs_result {
    unsafe {
        with_session(s, |session| {
            let executes = session.frame_begin(frame)?;
            if !out_executes_commands.is_null() {
                write_out(out_executes_commands, i32::from(executes));
            }
            Ok(())
        })
    }
}

/// One of rungs' events executed on `frame` (the current frame), sent by
/// `seat`: TIMING and NETWORK_REPORT are applied, LATENCYFUDGE is ignored.
/// Refused, changing nothing: an unregistered ID
/// (`RUNGS_ERR_UNREGISTERED_EVENT`), a payload of the wrong size or content
/// (`RUNGS_ERR_MALFORMED`), an unknown seat (`RUNGS_ERR_UNKNOWN_SEAT`).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_event_executed(
    s: *mut rungs_session,
    type_id: u8,
    seat: u8,
    frame: u32,
    payload: *const u8,
    len: usize,
) -> rungs_result {
    unsafe {
        with_session(s, |session| {
            require(payload, "payload")?;
            let bytes = std::slice::from_raw_parts(payload, len);
            session.event_executed(type_id, seat, frame, bytes)
        })
    }
}

/// Your removal of `seat` executed on the current frame (S3); removing the
/// master hands the role to the next human in house order (S4.6).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_player_removed(
    s: *mut rungs_session,
    seat: u8,
) -> rungs_result {
    unsafe { with_session(s, |session| session.player_removed(seat)) }
}

/// End the current frame: your report on report frames (32, 64, then every
/// 128), the master's evaluation, and on a send frame the `send_frame`
/// callback. Events to queue arrive through `queue_event` before it.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_frame_end(s: *mut rungs_session) -> rungs_result {
    unsafe { with_session(s, |session| session.frame_end()) }
}

/// The frame a command you issue now will execute on or after (S5): exact on
/// a send frame before `frame_end`, else a forecast for the next send frame;
/// the tag given to `send_frame` is the final one.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_submit_command(
    s: *mut rungs_session,
    out_frame: *mut u32,
) -> rungs_result {
    unsafe {
        with_session(s, |session| {
            require(out_frame, "out_frame")?;
            write_out(out_frame, session.submit_command()?);
            Ok(())
        })
    }
}

/// This frame's work starts at `now_us` (any monotonic µs clock) (S3).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_frame_work_begin(
    s: *mut rungs_session,
    now_us: u64,
) -> rungs_result {
    unsafe { with_session(s, |session| session.measurements().frame_work_begin(now_us)) }
}

/// This frame's work ends at `now_us`.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_frame_work_end(
    s: *mut rungs_session,
    now_us: u64,
) -> rungs_result {
    unsafe { with_session(s, |session| session.measurements().frame_work_end(now_us)) }
}

/// One frame's work took `duration_us` (instead of begin/end).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_add_frame_work_us(
    s: *mut rungs_session,
    duration_us: u64,
) -> rungs_result {
    unsafe {
        with_session(s, |session| {
            session.measurements().add_frame_work_us(duration_us);
            Ok(())
        })
    }
}

/// You start waiting for other players at `now_us` (S3).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_wait_begin(
    s: *mut rungs_session,
    now_us: u64,
) -> rungs_result {
    unsafe { with_session(s, |session| session.measurements().wait_begin(now_us)) }
}

/// The wait ends at `now_us`.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_wait_end(
    s: *mut rungs_session,
    now_us: u64,
) -> rungs_result {
    unsafe { with_session(s, |session| session.measurements().wait_end(now_us)) }
}

/// One wait lasted `duration_us` (instead of begin/end).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_add_wait_us(
    s: *mut rungs_session,
    duration_us: u64,
) -> rungs_result {
    unsafe {
        with_session(s, |session| {
            session.measurements().add_wait_us(duration_us);
            Ok(())
        })
    }
}

/// A round trip to `peer` in ms; `clean` is 1 when it was measured on a
/// packet sent once, 0 for a retransmitted one (it then never replaces a
/// measured value, S3/S8). Only other human players are peers.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_rtt_sample(
    s: *mut rungs_session,
    peer: u8,
    rtt_ms: u32,
    clean: i32,
) -> rungs_result {
    unsafe {
        with_session(s, |session| {
            let clean = match clean {
                0 => false,
                1 => true,
                _ => return Err(Error::InvalidArgument("clean must be 0 or 1")),
            };
            session.rtt_sample(peer, rtt_ms, clean)
        })
    }
}

/// Take the round trips to every peer from rungs' own transport (S8): for an
/// engine that sends its events through a `rungs_endpoint`. Call it each
/// frame (at least before report frames) instead of `rungs_session_rtt_sample`.
/// A link with no clean measurement yet makes the report say "none"; a
/// retransmitting one keeps its last measured round trip (S3). Links to
/// seats that are not this session's peers are ignored.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_sample_links(
    s: *mut rungs_session,
    endpoint: *mut super::transport::rungs_endpoint,
    now_us: u64,
) -> rungs_result {
    if s.is_null() {
        super::result::set_last_error("object handle is NULL");
        return super::result::RUNGS_ERR_NULL_POINTER;
    }
    let mut links = Vec::new();
    // SAFETY: NULL or live handles (caller contract); each guard checks its own.
    let read = unsafe { super::transport::link_report_rtts(endpoint, now_us, &mut links) };
    if read != super::result::RUNGS_OK {
        return read;
    }
    unsafe {
        with_session(s, |session| {
            for (seat, link) in links {
                session.sample_link(seat, link);
            }
            Ok(())
        })
    }
}

/// Change the game speed's cap, 1–255 (call on every machine on the same frame).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_set_speed(
    s: *mut rungs_session,
    speed_fps: u8,
) -> rungs_result {
    unsafe { with_session(s, |session| session.set_speed_fps(speed_fps)) }
}

/// Timing, target, tier, master and evaluation state, for a UI or log.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_status(
    s: *mut rungs_session,
    out: *mut rungs_timing_status,
) -> rungs_result {
    unsafe {
        with_session(s, |session| {
            require(out, "out")?;
            write_out(out, fill_status(session.machine()));
            Ok(())
        })
    }
}
