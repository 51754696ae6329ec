//! `rungs_session`: adaptive timing inside an engine that keeps its own
//! transport, event queue and event IDs (S3, S5, S7). See
//! `session::engine` for the frame loop.

use std::ffi::c_void;

use super::guard::{
    catch, free_object, hand_out, require, with_object, write_out, Guarded, Handle,
};
use super::payload::report_layout;
use super::result::{rungs_result, set_last_error, RUNGS_OK};
use super::timing_machine::{
    deliver_output, fill_status, rungs_timing_callbacks, rungs_timing_status,
};
use super::types::{human_seats, read_config, RUNGS_NO_SEAT};
use crate::error::Error;
use crate::report::Measurements;
use crate::session::{EngineSession, EventIds, Phase, SessionConfig, SessionOutput};
use crate::timing::MachineConfig;
use crate::wire::events::TimingLayout;

/// No event ID for an optional role (LATENCYFUDGE).
pub const RUNGS_NO_EVENT_ID: u16 = 0xFFFF;

/// No frame: "nothing needed yet" from `rungs_session_required_send_frame`,
/// "nothing held yet" in `rungs_session_frame_ready`'s array.
pub const RUNGS_NO_FRAME: u32 = 0xFFFF_FFFF;

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
/// Send frame `send_frame`: flush your packet now, stamping every event
/// collected since the previous send frame (yours and the queued ones) with
/// `tag` (S5), and put `send_frame` in the packet: frame readiness
/// (`rungs_session_frame_ready`) counts packets by send frame, because two
/// consecutive send frames can carry the same tag.
pub type rungs_send_frame_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, send_frame: u32, tag: u32)>;
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

/// The session's callbacks. `queue_event` and `send_frame` are required for a
/// playing machine (`rungs_session_new` refuses NULL ones); an observer
/// (`local_seat = RUNGS_NO_SEAT`) may leave them NULL; the others are
/// optional. They run synchronously on the calling thread inside the call
/// that caused them; calling back into the same session from one returns
/// `RUNGS_ERR_REENTRANT`.
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

/// Why a `rungs_session_*` call was refused: the code's error and, when
/// the call could say more, a message with what was got and what was
/// expected (the function name is added by [`call`]).
struct Refused {
    error: Error,
    detail: Option<String>,
}

impl From<Error> for Refused {
    fn from(error: Error) -> Refused {
        Refused {
            error,
            detail: None,
        }
    }
}

fn refused(error: Error, detail: String) -> Refused {
    Refused {
        error,
        detail: Some(detail),
    }
}

/// The message a refusal leaves for `rungs_last_error_message`:
/// `function: detail`, or `function: <the error>` without a detail.
fn message(function: &str, refusal: &Refused) -> String {
    match &refusal.detail {
        Some(detail) => format!("{function}: {detail}"),
        None => format!("{function}: {}", refusal.error),
    }
}

/// Run `f` on the session behind `s` (guarded: NULL, poisoned, re-entrant,
/// panics), deliver its callbacks, and on refusal record a message that
/// names `function`.
unsafe fn call(
    s: *const rungs_session,
    function: &'static str,
    f: impl FnOnce(&mut EngineSession) -> Result<(), Refused>,
) -> rungs_result {
    let mut kept = None;
    // SAFETY: NULL or a live session (caller contract); the guard checks NULL.
    let code = unsafe {
        with_object(s, |object| {
            let result = f(&mut object.session);
            object.deliver();
            keep_message(function, result, &mut kept)
        })
    };
    leave_message(code, kept)
}

/// Hand a refusal's error to the guard (which turns it into the code) and
/// keep its message, which [`leave_message`] records once the guard is done.
fn keep_message(
    function: &str,
    result: Result<(), Refused>,
    kept: &mut Option<String>,
) -> crate::Result<()> {
    result.map_err(|refusal| {
        *kept = Some(message(function, &refusal));
        refusal.error
    })
}

/// Record the kept message in place of the guard's bare one.
fn leave_message(code: rungs_result, kept: Option<String>) -> rungs_result {
    if let Some(message) = kept {
        set_last_error(&message);
    }
    code
}

/// For a call made outside a frame: "no frame is running (RULE); call
/// rungs_session_frame_begin(s, N) first", with the frame it expects next.
fn frame_loop_detail(session: &EngineSession, rule: &str) -> String {
    match session.phase() {
        Phase::Running(frame) => format!("frame {frame} is running ({rule})"),
        phase => format!(
            "no frame is running ({rule}); call rungs_session_frame_begin(s, {}) first",
            phase.next_frame().unwrap_or(u32::MAX)
        ),
    }
}

fn unknown_seat_detail(session: &EngineSession, seat: u8) -> String {
    let mask = (0..crate::report::record::MAX_SEATS as u8)
        .filter(|&s| session.machine().record().was_seated(s))
        .fold(0u32, |m, s| m | 1 << s);
    format!(
        "seat {seat} never was a human seat of this game; expected a seat in config->human_seat_mask 0x{mask:X}"
    )
}

fn event_id(value: u16, field: &str) -> Result<u8, Refused> {
    u8::try_from(value).map_err(|_| {
        refused(
            Error::InvalidArgument("event ID above 255"),
            format!("config->{field} is {value}; expected 0 to 255"),
        )
    })
}

/// Convert the C configuration, refusing what only the C side can get
/// wrong (the reserved byte, IDs above 255, enum values, the required
/// callbacks) with a message naming the field. The rules of the game itself
/// are checked by `EngineSession::new` and explained by [`explain_refusal`].
fn session_config(c: &rungs_session_config) -> Result<SessionConfig, Refused> {
    if c.reserved != 0 {
        return Err(refused(
            Error::InvalidArgument("reserved must be 0"),
            format!("config->reserved is {}; expected 0", c.reserved),
        ));
    }
    let human_seats = human_seats(c.seat_count, c.human_seat_mask)?;
    let local_seat = (c.local_seat != RUNGS_NO_SEAT).then_some(c.local_seat);
    // A playing machine queues reports and, as master, timing events, and
    // sends them on send frames: without these callbacks it would run
    // forever and never adapt. An observer does neither.
    if local_seat.is_some() {
        if c.callbacks.queue_event.is_none() {
            return Err(refused(
                Error::InvalidArgument("callbacks.queue_event is NULL"),
                "config->callbacks.queue_event is NULL; the session cannot queue reports or \
                 timing events without it (only an observer, config->local_seat = RUNGS_NO_SEAT, \
                 may leave it NULL)"
                    .to_string(),
            ));
        }
        if c.callbacks.send_frame.is_none() {
            return Err(refused(
                Error::InvalidArgument("callbacks.send_frame is NULL"),
                "config->callbacks.send_frame is NULL; the session cannot send reports or timing \
                 events without it (only an observer, config->local_seat = RUNGS_NO_SEAT, may \
                 leave it NULL)"
                    .to_string(),
            ));
        }
    }
    let report_layout = report_layout(c.report_layout).map_err(|e| {
        refused(
            e,
            format!(
                "config->report_layout is {}; expected RUNGS_REPORT_LAYOUT_COMPACT (0) or \
                 RUNGS_REPORT_LAYOUT_EXTENDED (1)",
                c.report_layout
            ),
        )
    })?;
    let latency_fudge = match c.latency_fudge_event_id {
        RUNGS_NO_EVENT_ID => None,
        id => Some(u8::try_from(id).map_err(|_| {
            refused(
                Error::InvalidArgument("event ID above 255"),
                format!(
                    "config->latency_fudge_event_id is {id}; expected 0 to 255 or RUNGS_NO_EVENT_ID"
                ),
            )
        })?),
    };
    Ok(SessionConfig {
        machine: MachineConfig::adaptive(c.speed_fps, human_seats, local_seat),
        ids: EventIds {
            timing: event_id(c.timing_event_id, "timing_event_id")?,
            network_report: event_id(c.network_report_event_id, "network_report_event_id")?,
            latency_fudge,
        },
        timing_layout: TimingLayout::TiberianSun {
            fog_bias: c.timing_fog_bias,
        },
        report_layout,
    })
}

/// Which field `EngineSession::new` refused, in C terms, with what it got
/// and what was expected.
fn explain_refusal(c: &rungs_session_config, config: &SessionConfig, error: &Error) -> String {
    let ids = config.ids;
    let shared = [
        (
            "timing_event_id",
            "network_report_event_id",
            Some(ids.timing),
            Some(ids.network_report),
        ),
        (
            "timing_event_id",
            "latency_fudge_event_id",
            Some(ids.timing),
            ids.latency_fudge,
        ),
        (
            "network_report_event_id",
            "latency_fudge_event_id",
            Some(ids.network_report),
            ids.latency_fudge,
        ),
    ]
    .into_iter()
    .find(|(_, _, a, b)| a.is_some() && a == b);
    if c.speed_fps == 0 {
        "config->speed_fps is 0; expected 1 to 255".to_string()
    } else if c.human_seat_mask == 0 {
        "config->human_seat_mask is 0; expected at least one human seat".to_string()
    } else if let Some((a, b, Some(id), _)) = shared {
        format!("config->{a} and config->{b} are both {id}; expected a distinct ID per role")
    } else if c.local_seat != RUNGS_NO_SEAT {
        format!(
            "config->local_seat is {}; expected a seat in config->human_seat_mask 0x{:X}, or \
             RUNGS_NO_SEAT to follow a recording",
            c.local_seat, c.human_seat_mask
        )
    } else {
        error.to_string()
    }
}

/// Make a session for the eve of frame 0; `*out` is written only on success.
///
/// A configuration that can never work is refused, and the message
/// (`rungs_last_error_message`) names the field: a playing machine
/// (`local_seat` a human seat) needs `callbacks.queue_event` and
/// `callbacks.send_frame`; an observer (`RUNGS_NO_SEAT`) may leave them NULL.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `config` or `out` is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if `config->struct_size` is smaller than this
/// library's struct, `config->reserved` is not 0, `speed_fps` is 0, `seat_count`
/// is not 1–16, `human_seat_mask` is 0 or has bits at or above `seat_count`,
/// `local_seat` is not a human seat nor `RUNGS_NO_SEAT`, `report_layout` is
/// not a `RUNGS_REPORT_LAYOUT_*`, an event ID is above 255, two roles share
/// an event ID, or a playing machine lacks `queue_event` or `send_frame`;
/// RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_new(
    config: *const rungs_session_config,
    out: *mut *mut rungs_session,
) -> rungs_result {
    let mut kept = None;
    let code = catch(|| {
        let made = (|| -> Result<(), Refused> {
            require(out, "out").map_err(|e| refused(e, "out is NULL".to_string()))?;
            // SAFETY: read_config checks NULL and struct_size before reading the rest.
            let c_config = unsafe { read_config(config, "config") }.map_err(|e| {
                let detail = if config.is_null() {
                    "config is NULL".to_string()
                } else {
                    // SAFETY: non-NULL; struct_size is the first field of every config.
                    let got = unsafe { config.cast::<u32>().read_unaligned() };
                    format!(
                        "config->struct_size is {got}; expected at least sizeof(rungs_session_config) = {}",
                        std::mem::size_of::<rungs_session_config>()
                    )
                };
                refused(e, detail)
            })?;
            let session_config = session_config(&c_config)?;
            let session = EngineSession::new(&session_config)
                .map_err(|e| refused(e.clone(), explain_refusal(&c_config, &session_config, &e)))?;
            let object = SessionObject {
                session,
                callbacks: c_config.callbacks,
            };
            // SAFETY: `out` is non-NULL (checked) and writable.
            unsafe { hand_out(out, rungs_session(Guarded::new(object))) }?;
            Ok(())
        })();
        keep_message("rungs_session_new", made, &mut kept)
    });
    leave_message(code, kept)
}

/// Release a session. NULL is accepted.
///
/// Returns: RUNGS_OK (also for NULL); RUNGS_ERR_REENTRANT if called from
/// inside one of the session's own callbacks; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_free(s: *mut rungs_session) -> rungs_result {
    // SAFETY: NULL or a live session from `_new`.
    unsafe { free_object(s) }
}

/// Start `frame` (0, 1, 2, ... without gaps). `*out_executes_commands` (may
/// be NULL) is 1 when this frame executes commands: execute every queued
/// event tagged at or before it, in (tag, seat, issue order), handing rungs'
/// events to `rungs_session_event_executed`. Before executing, make sure the
/// frame is ready (`rungs_session_frame_ready`).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` is NULL;
/// RUNGS_ERR_STATE if the previous frame is still running (call
/// `rungs_session_frame_end`) or `frame` is not the next frame;
/// RUNGS_ERR_POISONED, RUNGS_ERR_REENTRANT, RUNGS_ERR_PANIC (every object call).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_frame_begin(
    s: *mut rungs_session,
    frame: u32,
    out_executes_commands: *mut i32,
) -> rungs_result {
    unsafe {
        call(s, "rungs_session_frame_begin", |session| {
            let phase = session.phase();
            let executes = session.frame_begin(frame).map_err(|e| {
                let detail = match phase {
                    Phase::Running(running) => format!(
                        "got frame {frame}, but frame {running} is still running; call \
                         rungs_session_frame_end first"
                    ),
                    _ => format!(
                        "got frame {frame}; expected frame {} (frames run 0, 1, 2, ... without gaps)",
                        phase.next_frame().unwrap_or(u32::MAX)
                    ),
                };
                refused(e, detail)
            })?;
            if !out_executes_commands.is_null() {
                write_out(out_executes_commands, i32::from(executes));
            }
            Ok(())
        })
    }
}

/// Frame readiness (S5): `*out_send_frame` is the send frame whose packet
/// you must hold from every peer (every other human player still in the
/// game) before `frame` executes, or `RUNGS_NO_FRAME` when nothing is
/// needed yet. It is the last send frame whose tag is at or before `frame`:
/// a command executes on the first send frame at or after its tag, and
/// during a staged decrease two consecutive send frames can carry the same
/// tag, so "a packet tagged at or after `frame` from every peer" is not
/// enough. Count packets by the send frame number `send_frame` gave you.
/// Ask after `rungs_session_frame_end` of `frame - 1` (or during `frame`);
/// the answer is the same on every machine.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` or `out_send_frame` is
/// NULL; RUNGS_ERR_STATE if `frame - 1` has not ended (its send frames are not
/// final yet) or `frame` is more than 256 frames before that;
/// RUNGS_ERR_POISONED, RUNGS_ERR_REENTRANT, RUNGS_ERR_PANIC (every object call).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_required_send_frame(
    s: *mut rungs_session,
    frame: u32,
    out_send_frame: *mut u32,
) -> rungs_result {
    unsafe {
        call(s, "rungs_session_required_send_frame", |session| {
            require(out_send_frame, "out_send_frame")?;
            let needed = readiness(session, frame)?;
            write_out(out_send_frame, needed.unwrap_or(RUNGS_NO_FRAME));
            Ok(())
        })
    }
}

/// Frame readiness (S5) from what you hold: `held_send_frames[seat]` is the
/// latest send frame you hold from `seat` (`RUNGS_NO_FRAME` for none yet),
/// for every seat `0 .. seat_count - 1` (`count` must be `seat_count`).
/// Only peers are read: entries of your own seat, AI seats and removed
/// players are ignored. `*out_ready` is 1 when `frame` may execute, i.e.
/// every peer's entry is at or after `rungs_session_required_send_frame`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s`, `held_send_frames` or
/// `out_ready` is NULL; RUNGS_ERR_INVALID_ARGUMENT if `count` is not the
/// session's `seat_count`; RUNGS_ERR_STATE as for
/// `rungs_session_required_send_frame`; RUNGS_ERR_POISONED,
/// RUNGS_ERR_REENTRANT, RUNGS_ERR_PANIC (every object call).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_frame_ready(
    s: *mut rungs_session,
    frame: u32,
    held_send_frames: *const u32,
    count: usize,
    out_ready: *mut i32,
) -> rungs_result {
    unsafe {
        call(s, "rungs_session_frame_ready", |session| {
            require(held_send_frames, "held_send_frames")?;
            require(out_ready, "out_ready")?;
            let seat_count = session.machine().seat_count();
            if count != usize::from(seat_count) {
                return Err(refused(
                    Error::InvalidArgument("count must be seat_count"),
                    format!("count is {count}; expected config->seat_count {seat_count}"),
                ));
            }
            // SAFETY: non-NULL and `count` readable entries (caller contract).
            let held = std::slice::from_raw_parts(held_send_frames, count);
            readiness(session, frame)?;
            let ready = session
                .frame_ready(frame, |seat| {
                    let entry = held[usize::from(seat)];
                    (entry != RUNGS_NO_FRAME).then_some(entry)
                })
                .map_err(Refused::from)?;
            write_out(out_ready, i32::from(ready));
            Ok(())
        })
    }
}

/// The session's answer for `frame`, refused with the frames it can answer.
fn readiness(session: &EngineSession, frame: u32) -> Result<Option<u32>, Refused> {
    session.required_send_frame(frame).map_err(|e| {
        let latest = match session.phase() {
            Phase::NotStarted => 0,
            Phase::Running(f) => f,
            Phase::Ended(f) => f.saturating_add(1),
        };
        let oldest = latest.saturating_sub(crate::timing::SendHistory::WINDOW);
        refused(
            e,
            format!(
                "got frame {frame}; expected {oldest} to {latest} (a frame whose previous frame \
                 has ended, at most 256 frames back)"
            ),
        )
    })
}

/// One of rungs' events executed on `frame` (the current frame), sent by
/// `seat`: TIMING and NETWORK_REPORT are applied, LATENCYFUDGE is ignored. A
/// report from a player already removed is a late event of normal play: it
/// is accepted and changes nothing (S3). A refused event changes nothing.
///
/// Returns: RUNGS_OK (also for a late report); RUNGS_ERR_NULL_POINTER if `s`
/// or `payload` is NULL; RUNGS_ERR_STATE if no frame is running or `frame` is
/// not the current frame; RUNGS_ERR_UNREGISTERED_EVENT if `type_id` is none
/// of the configured event IDs; RUNGS_ERR_MALFORMED if the payload has the
/// wrong size or content for its layout; RUNGS_ERR_UNKNOWN_SEAT if `seat`
/// never was a human seat of the game; RUNGS_ERR_POISONED,
/// RUNGS_ERR_REENTRANT, RUNGS_ERR_PANIC (every object call).
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
        call(s, "rungs_session_event_executed", |session| {
            require(payload, "payload")?;
            let bytes = std::slice::from_raw_parts(payload, len);
            session
                .event_executed(type_id, seat, frame, bytes)
                .map_err(|e| {
                    let detail = event_detail(session, &e, type_id, seat, frame, len);
                    refused(e, detail)
                })
        })
    }
}

fn event_detail(
    session: &EngineSession,
    error: &Error,
    type_id: u8,
    seat: u8,
    frame: u32,
    len: usize,
) -> String {
    let ids = session.event_ids();
    match error {
        Error::State(_) => match session.phase() {
            Phase::Running(current) => {
                format!("got frame {frame}; expected the current frame {current}")
            }
            _ => frame_loop_detail(session, "events execute during a frame"),
        },
        Error::UnregisteredEvent(_) => format!(
            "type_id {type_id} is not registered; expected config->timing_event_id {}, \
             config->network_report_event_id {}{}",
            ids.timing,
            ids.network_report,
            ids.latency_fudge.map_or(String::new(), |f| format!(
                " or config->latency_fudge_event_id {f}"
            ))
        ),
        Error::Malformed(why) => {
            let (name, expected) = if type_id == ids.timing {
                ("TIMING", session.timing_layout().payload_len())
            } else {
                ("NETWORK_REPORT", session.report_layout().payload_len())
            };
            format!(
                "{name} payload of {len} bytes from seat {seat} is malformed ({why}); expected \
                 {expected} bytes in the configured layout"
            )
        }
        Error::UnknownSeat(_) => unknown_seat_detail(session, seat),
        other => other.to_string(),
    }
}

/// Your removal of `seat` executed on the current frame (S3); removing the
/// master hands the role to the next human in house order (S4.6). A second
/// removal of a seat already removed (every machine may issue one for the
/// same lost player) is accepted and changes nothing.
///
/// Returns: RUNGS_OK (also for a repeated removal); RUNGS_ERR_NULL_POINTER
/// if `s` is NULL; RUNGS_ERR_STATE if no frame is running;
/// RUNGS_ERR_UNKNOWN_SEAT if `seat` never was a human seat of the game;
/// RUNGS_ERR_POISONED, RUNGS_ERR_REENTRANT, RUNGS_ERR_PANIC (every object call).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_player_removed(
    s: *mut rungs_session,
    seat: u8,
) -> rungs_result {
    unsafe {
        call(s, "rungs_session_player_removed", |session| {
            session.player_removed(seat).map_err(|e| {
                let detail = match e {
                    Error::UnknownSeat(_) => unknown_seat_detail(session, seat),
                    _ => frame_loop_detail(session, "removals execute during a frame"),
                };
                refused(e, detail)
            })
        })
    }
}

/// End the current frame: your report on report frames (32, 64, then every
/// 128), the master's evaluation, and on a send frame the `send_frame`
/// callback. Events to queue arrive through `queue_event` before it.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` is NULL;
/// RUNGS_ERR_STATE if no frame is running (call `rungs_session_frame_begin`);
/// RUNGS_ERR_POISONED, RUNGS_ERR_REENTRANT, RUNGS_ERR_PANIC (every object call).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_frame_end(s: *mut rungs_session) -> rungs_result {
    unsafe {
        call(s, "rungs_session_frame_end", |session| {
            session.frame_end().map_err(|e| {
                let detail = frame_loop_detail(session, "a frame ends after it begins");
                refused(e, detail)
            })
        })
    }
}

/// The frame a command you issue now will execute on or after (S5): exact on
/// a send frame before `frame_end`, else a forecast for the next send frame;
/// the tag given to `send_frame` is the final one.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` or `out_frame` is NULL;
/// RUNGS_ERR_POISONED, RUNGS_ERR_REENTRANT, RUNGS_ERR_PANIC (every object call).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_submit_command(
    s: *mut rungs_session,
    out_frame: *mut u32,
) -> rungs_result {
    unsafe {
        call(s, "rungs_session_submit_command", |session| {
            require(out_frame, "out_frame")?;
            write_out(out_frame, session.submit_command()?);
            Ok(())
        })
    }
}

/// A begin/end measurement call (`what`: "frame's work", "wait"), with
/// messages in C names; `pair` is the other half.
unsafe fn bracket(
    s: *mut rungs_session,
    function: &'static str,
    (what, pair): (&'static str, &'static str),
    now_us: u64,
    f: impl FnOnce(&mut Measurements, u64) -> crate::Result<()>,
) -> rungs_result {
    let begins = function.ends_with("_begin");
    unsafe {
        call(s, function, |session| {
            f(session.measurements(), now_us).map_err(|e| {
                let detail = match (&e, begins) {
                    (Error::State(_), true) => {
                        format!("the {what} is already open; call {pair} first")
                    }
                    (Error::State(_), false) => format!("no {what} is open; call {pair} first"),
                    (Error::InvalidArgument(_), _) => format!(
                        "now_us is {now_us}; expected at or after the now_us given to {pair}"
                    ),
                    (other, _) => other.to_string(),
                };
                refused(e, detail)
            })
        })
    }
}

/// This frame's work starts at `now_us` (any monotonic µs clock) (S3).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` is NULL; RUNGS_ERR_STATE
/// if a frame's work is already open (call `rungs_session_frame_work_end`);
/// RUNGS_ERR_POISONED, RUNGS_ERR_REENTRANT, RUNGS_ERR_PANIC (every object call).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_frame_work_begin(
    s: *mut rungs_session,
    now_us: u64,
) -> rungs_result {
    unsafe {
        bracket(
            s,
            "rungs_session_frame_work_begin",
            ("frame's work", "rungs_session_frame_work_end"),
            now_us,
            Measurements::frame_work_begin,
        )
    }
}

/// This frame's work ends at `now_us`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` is NULL; RUNGS_ERR_STATE
/// if no frame's work is open (call `rungs_session_frame_work_begin`);
/// RUNGS_ERR_INVALID_ARGUMENT if `now_us` is before the begin;
/// RUNGS_ERR_POISONED, RUNGS_ERR_REENTRANT, RUNGS_ERR_PANIC (every object call).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_frame_work_end(
    s: *mut rungs_session,
    now_us: u64,
) -> rungs_result {
    unsafe {
        bracket(
            s,
            "rungs_session_frame_work_end",
            ("frame's work", "rungs_session_frame_work_begin"),
            now_us,
            Measurements::frame_work_end,
        )
    }
}

/// One frame's work took `duration_us` (instead of begin/end).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` is NULL;
/// RUNGS_ERR_POISONED, RUNGS_ERR_REENTRANT, RUNGS_ERR_PANIC (every object call).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_add_frame_work_us(
    s: *mut rungs_session,
    duration_us: u64,
) -> rungs_result {
    unsafe {
        call(s, "rungs_session_add_frame_work_us", |session| {
            session.measurements().add_frame_work_us(duration_us);
            Ok(())
        })
    }
}

/// You start waiting for other players at `now_us` (S3).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` is NULL; RUNGS_ERR_STATE
/// if a wait is already open (call `rungs_session_wait_end`);
/// RUNGS_ERR_POISONED, RUNGS_ERR_REENTRANT, RUNGS_ERR_PANIC (every object call).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_wait_begin(
    s: *mut rungs_session,
    now_us: u64,
) -> rungs_result {
    unsafe {
        bracket(
            s,
            "rungs_session_wait_begin",
            ("wait", "rungs_session_wait_end"),
            now_us,
            Measurements::wait_begin,
        )
    }
}

/// The wait ends at `now_us`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` is NULL; RUNGS_ERR_STATE
/// if no wait is open (call `rungs_session_wait_begin`);
/// RUNGS_ERR_INVALID_ARGUMENT if `now_us` is before the begin;
/// RUNGS_ERR_POISONED, RUNGS_ERR_REENTRANT, RUNGS_ERR_PANIC (every object call).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_wait_end(
    s: *mut rungs_session,
    now_us: u64,
) -> rungs_result {
    unsafe {
        bracket(
            s,
            "rungs_session_wait_end",
            ("wait", "rungs_session_wait_begin"),
            now_us,
            Measurements::wait_end,
        )
    }
}

/// One wait lasted `duration_us` (instead of begin/end).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` is NULL;
/// RUNGS_ERR_POISONED, RUNGS_ERR_REENTRANT, RUNGS_ERR_PANIC (every object call).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_add_wait_us(
    s: *mut rungs_session,
    duration_us: u64,
) -> rungs_result {
    unsafe {
        call(s, "rungs_session_add_wait_us", |session| {
            session.measurements().add_wait_us(duration_us);
            Ok(())
        })
    }
}

/// A round trip to `peer` in ms; `clean` is 1 when it was measured on a
/// packet sent once, 0 for a retransmitted one (it then never replaces a
/// measured value, S3/S8). Only other human players are peers.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if `clean` is not 0 or 1;
/// RUNGS_ERR_UNKNOWN_SEAT if `peer` is not another human player (your own
/// seat, an AI seat, a removed player or no seat);
/// RUNGS_ERR_POISONED, RUNGS_ERR_REENTRANT, RUNGS_ERR_PANIC (every object call).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_rtt_sample(
    s: *mut rungs_session,
    peer: u8,
    rtt_ms: u32,
    clean: i32,
) -> rungs_result {
    unsafe {
        call(s, "rungs_session_rtt_sample", |session| {
            let clean = match clean {
                0 => false,
                1 => true,
                _ => {
                    return Err(refused(
                        Error::InvalidArgument("clean must be 0 or 1"),
                        format!("clean is {clean}; expected 0 or 1"),
                    ))
                }
            };
            session.rtt_sample(peer, rtt_ms, clean).map_err(|e| {
                let peers: Vec<String> = session.peers().map(|p| p.to_string()).collect();
                refused(
                    e,
                    format!(
                        "peer {peer} is not measured; expected another human player still in \
                         the game: {}",
                        if peers.is_empty() {
                            "none".to_string()
                        } else {
                            peers.join(", ")
                        }
                    ),
                )
            })
        })
    }
}

/// Take the round trips to every peer from rungs' own transport (S8): for an
/// engine that sends its events through a `rungs_endpoint`. Call it each
/// frame (at least before report frames) instead of `rungs_session_rtt_sample`.
/// A link with no clean measurement yet makes the report say "none"; a
/// retransmitting one keeps its last measured round trip (S3). Links to
/// seats that are not this session's peers are ignored.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` or `endpoint` is NULL;
/// RUNGS_ERR_POISONED, RUNGS_ERR_REENTRANT, RUNGS_ERR_PANIC (every object
/// call, for either object).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_sample_links(
    s: *mut rungs_session,
    endpoint: *mut super::transport::rungs_endpoint,
    now_us: u64,
) -> rungs_result {
    if s.is_null() {
        set_last_error("rungs_session_sample_links: s is NULL");
        return super::result::RUNGS_ERR_NULL_POINTER;
    }
    let mut links = Vec::new();
    // SAFETY: NULL or live handles (caller contract); each guard checks its own.
    let read = unsafe { super::transport::link_report_rtts(endpoint, now_us, &mut links) };
    if read != RUNGS_OK {
        return read;
    }
    unsafe {
        call(s, "rungs_session_sample_links", |session| {
            for (seat, link) in links {
                session.sample_link(seat, link);
            }
            Ok(())
        })
    }
}

/// Change the game speed's cap, 1–255 (call on every machine on the same frame).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if `speed_fps` is 0;
/// RUNGS_ERR_POISONED, RUNGS_ERR_REENTRANT, RUNGS_ERR_PANIC (every object call).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_set_speed(
    s: *mut rungs_session,
    speed_fps: u8,
) -> rungs_result {
    unsafe {
        call(s, "rungs_session_set_speed", |session| {
            session
                .set_speed_fps(speed_fps)
                .map_err(|e| refused(e, format!("speed_fps is {speed_fps}; expected 1 to 255")))
        })
    }
}

/// Timing, target, tier, master and evaluation state, for a UI or log.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` or `out` is NULL;
/// RUNGS_ERR_POISONED, RUNGS_ERR_REENTRANT, RUNGS_ERR_PANIC (every object call).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_status(
    s: *mut rungs_session,
    out: *mut rungs_timing_status,
) -> rungs_result {
    unsafe {
        call(s, "rungs_session_status", |session| {
            require(out, "out")?;
            write_out(out, fill_status(session.machine()));
            Ok(())
        })
    }
}
