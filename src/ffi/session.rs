//! `rungs_session`: adaptive timing inside an engine that keeps its own
//! transport, event queue and event IDs (S3, S5, S7). See
//! `session::engine` for the frame loop.

use std::ffi::c_void;

use super::args::{
    field_offset, flag, in_range, read_grown_config, require, slice_in, write_optional, write_out,
    write_to,
};
use super::guard::{call, free_call, object_call, Guarded, Handle};
use super::measure::rungs_measurements;
use super::payload::rungs_report_layout;
use super::payload::session_report_layout;
use super::result::rungs_result;
use super::result::{CallError, Result};
use super::snapshot::{read_status, Published, PublishesStatus};
use super::timing_machine::{
    deliver_output, fill_status, rungs_timing_callbacks, rungs_timing_status,
};
use super::types::{
    human_seats, local_seat, rungs_frame_rate_changed_fn, rungs_log_fn, rungs_player_message_fn,
    rungs_queue_event_fn, rungs_seat_event_fn, rungs_send_frame_fn, rungs_timing_changed_fn,
    timing_policy,
};
use super::types::{rungs_log_level, rungs_policy};
use crate::error::Error;
use crate::report::Measurements;
use crate::session::{
    EngineRules, EngineSession, EventIds, EventRole, SendOrder, SessionConfig, SessionOutput,
};
use crate::timing::{MachineConfig, TickTimer};
use crate::wire::TimingLayout;

/// No event ID for an optional role (LATENCYFUDGE).
pub const RUNGS_NO_EVENT_ID: u16 = 0xFFFF;

/// No frame: "nothing needed yet" from `rungs_session_required_send_frame`,
/// "nothing held yet" in `rungs_session_frame_ready`'s array.
pub const RUNGS_NO_FRAME: u32 = 0xFFFF_FFFF;

/// No packet: a cut before a seat's first packet, or no packet held yet.
pub const RUNGS_NO_PACKET: u32 = 0xFFFF_FFFF;

/// Where the send falls in an engine's frame, one of `RUNGS_SEND_*`.
pub type rungs_send_order = u8;

/// `rungs_session_config.send_order`: begin, execute, end, then send (the
/// `send_frame` callback comes from `rungs_session_frame_end`). The default.
pub const RUNGS_SEND_AFTER_EXECUTE: rungs_send_order = 0;
/// `rungs_session_config.send_order`: Tiberian Sun's frame order — a send
/// frame sends, then waits for its peers, then executes. The `send_frame`
/// callback comes from `rungs_session_frame_begin`, and the frames that
/// execute events are exactly the send frames.
pub const RUNGS_SEND_BEFORE_EXECUTE: rungs_send_order = 1;

/// Log level of an error.
pub const RUNGS_LOG_ERROR: rungs_log_level = 0;
/// Log level of a warning (e.g. a refused event).
pub const RUNGS_LOG_WARN: rungs_log_level = 1;
/// Log level of information (timing decisions, removals).
pub const RUNGS_LOG_INFO: rungs_log_level = 2;
/// Log level of debugging detail.
pub const RUNGS_LOG_DEBUG: rungs_log_level = 3;

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
    pub queue_event: rungs_queue_event_fn,
    pub send_frame: rungs_send_frame_fn,
    pub set_frame_rate: rungs_frame_rate_changed_fn,
    pub player_message: rungs_player_message_fn,
    pub master_changed: rungs_seat_event_fn,
    pub timing_changed: rungs_timing_changed_fn,
    pub log: rungs_log_fn,
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
    /// This machine's seat (a human seat), or `RUNGS_NO_SEAT` for a machine
    /// that plays no seat — an observer, or one following a recording: it
    /// reports and sends nothing, and waits for every player's packets.
    pub local_seat: u8,
    /// `RUNGS_REPORT_LAYOUT_COMPACT`, `RUNGS_REPORT_LAYOUT_EXTENDED`,
    /// `RUNGS_REPORT_LAYOUT_DETAILED` (what the tracking policy reads) or
    /// `RUNGS_REPORT_LAYOUT_NEEDS` (that and the look-ahead the frames
    /// needed, `rungs_measurements_add_frame_need` on `rungs_session_measurements`).
    pub report_layout: rungs_report_layout,
    /// Bit `i` set: seat `i` is a human player.
    pub human_seat_mask: u32,
    /// Your TIMING event ID, 0–255 (31 in Tiberian Sun, 29 in Red Alert).
    pub timing_event_id: u16,
    /// Your NETWORK_REPORT event ID, 0–255: a new event, so an ID that no
    /// part of your game uses — not its own events, nor those of any mod or
    /// spawner loaded with it (in Tiberian Sun with the community spawner, 36
    /// is protocol 0's RESPONSE_TIME_2). There is no default: a zeroed
    /// config says 0, which is an event of most games (EMPTY in Tiberian Sun
    /// and Red Alert), so set it. Register its payload length
    /// (`RUNGS_REPORT_*_PAYLOAD_LEN` of `report_layout`) in your event length
    /// table.
    pub network_report_event_id: u16,
    /// Your LATENCYFUDGE event ID (35 in Tiberian Sun) or `RUNGS_NO_EVENT_ID`
    /// (a zeroed config says 0: set it).
    pub latency_fudge_event_id: u16,
    /// Added to MaxAhead in TIMING payloads and removed on receipt:
    /// `RUNGS_TS_FOG_BIAS` (10) for an engine keeping vanilla TS's fog-of-war
    /// quirk in its TIMING bytes while fog is on, else 0 (`docs/payloads.md`).
    /// The bytes only: the game's own TIMING handler must not run as well
    /// (it applies decreases at once; rungs stages them, S5) — pass TIMING to
    /// `rungs_session_event_executed` instead.
    pub timing_fog_bias: u8,
    /// `RUNGS_POLICY_ADAPTIVE` (0) or `RUNGS_POLICY_TRACKING`; the same on
    /// every machine of a game.
    pub policy: rungs_policy,
    pub callbacks: rungs_session_callbacks,
    /// Ticks per second of your frame timer when it counts whole ticks (60
    /// for Tiberian Sun and Red Alert): every rate `set_frame_rate` gives is
    /// one the timer hits exactly (a divisor of `tick_hz`, the largest at or
    /// below the rate the rules chose), and `rungs_session_rtt_sample_ticks`
    /// takes its ticks (pass the same rate to
    /// `rungs_measurements_add_frame_ticks` for the frames' work). 0: you pace in µs,
    /// any rate. The same on every machine of a game. (Added after ABI 2's
    /// first release: a caller built against the older, smaller struct gets
    /// 0.)
    pub tick_hz: u8,
    /// `RUNGS_SEND_AFTER_EXECUTE` (0, the default) or
    /// `RUNGS_SEND_BEFORE_EXECUTE` (Tiberian Sun's frame order). (Added with
    /// `tick_hz`: 0 for an older caller.)
    pub send_order: rungs_send_order,
}

/// The size of `rungs_session_config` before `tick_hz` and `send_order`.
fn session_config_v1_size() -> usize {
    field_offset!(rungs_session_config, tick_hz)
}

/// The session and the engine's callbacks.
pub struct SessionObject {
    session: EngineSession,
    callbacks: rungs_session_callbacks,
}

/// An opaque engine session, made by `rungs_session_new`.
/// The guarded session, the status it published last (`snapshot.rs`) and
/// the handle it lends its measurements through
/// (`rungs_session_measurements`), which points back at it.
pub struct rungs_session(Guarded<SessionObject>, Published, rungs_measurements);

impl Handle for rungs_session {
    type State = SessionObject;
    fn guarded(&self) -> &Guarded<SessionObject> {
        &self.0
    }
}

impl PublishesStatus for rungs_session {
    fn published(&self) -> &Published {
        &self.1
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

/// The C function `function`'s call on the session behind `s`: `f` runs
/// inside the guard, then the session's outputs go to the callbacks.
unsafe fn session_call(
    function: &'static str,
    s: *const rungs_session,
    f: impl FnOnce(&mut EngineSession) -> Result<()>,
) -> rungs_result {
    // SAFETY: NULL or a live session (caller contract); the guard checks NULL.
    unsafe {
        object_call(function, s, |object| {
            let result = f(&mut object.session);
            object.deliver();
            // SAFETY: the guard let this call in, so `s` is non-NULL and live.
            (*s).1.publish(fill_status(object.session.machine()));
            result
        })
    }
}

/// The C function `function`'s call on the measurements `s` lends
/// (`measure.rs`): inside the session's guard, as its own calls are.
///
/// # Safety
/// `s` is a live session.
pub(crate) unsafe fn lent_measurements_call(
    function: &'static str,
    s: *const rungs_session,
    f: impl FnOnce(&mut Measurements) -> Result<()>,
) -> rungs_result {
    // SAFETY: forwarded contract.
    unsafe { session_call(function, s, |session| f(session.measurements())) }
}

/// The C config field of an event role.
fn event_id_field(role: EventRole) -> &'static str {
    match role {
        EventRole::Timing => "config->timing_event_id",
        EventRole::NetworkReport => "config->network_report_event_id",
        EventRole::LatencyFudge => "config->latency_fudge_event_id",
    }
}

/// Convert the C configuration, refusing with a message naming the field
/// whatever `EngineSession::new` would refuse and what only C can get wrong
/// (the policy, IDs above 255, enum values, the required callbacks).
fn session_config(c: &rungs_session_config) -> Result<SessionConfig> {
    let policy = timing_policy(c.policy, "config->policy")?;
    let speed_fps = in_range(c.speed_fps, 1, 255, "config->speed_fps")?;
    let human_seats = human_seats(c.seat_count, c.human_seat_mask)?;
    let local_seat = local_seat(c.local_seat, &human_seats, true)?;
    // A playing machine queues reports and, as master, timing events, and
    // sends them on send frames: without these callbacks it would run
    // forever and never adapt. An observer does neither.
    if local_seat.is_some() {
        if c.callbacks.queue_event.is_none() {
            return Err(Error::invalid_value(
                "config->callbacks.queue_event",
                "NULL",
                "a callback: the session cannot queue reports or timing events without it (only \
                 an observer, config->local_seat = RUNGS_NO_SEAT, may leave it NULL)",
            )
            .into());
        }
        if c.callbacks.send_frame.is_none() {
            return Err(Error::invalid_value(
                "config->callbacks.send_frame",
                "NULL",
                "a callback: the session cannot send reports or timing events without it (only \
                 an observer, config->local_seat = RUNGS_NO_SEAT, may leave it NULL)",
            )
            .into());
        }
    }
    let report_layout = session_report_layout(c.report_layout).ok_or_else(|| {
        Error::invalid_value(
            "config->report_layout",
            c.report_layout,
            "RUNGS_REPORT_LAYOUT_COMPACT (0), RUNGS_REPORT_LAYOUT_EXTENDED (1), \
             RUNGS_REPORT_LAYOUT_DETAILED (2) or RUNGS_REPORT_LAYOUT_NEEDS (3)",
        )
    })?;
    let event_id = |value: u16, role| -> Result<u8> {
        let id = in_range(value, 0, u16::from(u8::MAX), event_id_field(role))?;
        Ok(id as u8)
    };
    let latency_fudge = match c.latency_fudge_event_id {
        RUNGS_NO_EVENT_ID => None,
        id => Some(u8::try_from(id).map_err(|_| {
            Error::invalid_value(
                "config->latency_fudge_event_id",
                id,
                "0 to 255 or RUNGS_NO_EVENT_ID",
            )
        })?),
    };
    let ids = EventIds {
        timing: event_id(c.timing_event_id, EventRole::Timing)?,
        network_report: event_id(c.network_report_event_id, EventRole::NetworkReport)?,
        latency_fudge,
    };
    // The session's own rule, asked here to name the C fields.
    if let Some((first, second, id)) = ids.clash() {
        return Err(Error::invalid_value(
            event_id_field(second),
            id,
            format!(
                "an ID other than {}'s (a distinct ID per role)",
                event_id_field(first)
            ),
        )
        .into());
    }
    let tick_timer = (c.tick_hz != 0)
        .then(|| TickTimer::new(c.tick_hz))
        .transpose()?;
    let send_order = match c.send_order {
        RUNGS_SEND_AFTER_EXECUTE => SendOrder::AfterExecute,
        RUNGS_SEND_BEFORE_EXECUTE => SendOrder::BeforeExecute,
        other => {
            return Err(Error::invalid_value(
                "config->send_order",
                other,
                "RUNGS_SEND_AFTER_EXECUTE (0) or RUNGS_SEND_BEFORE_EXECUTE (1)",
            )
            .into())
        }
    };
    Ok(SessionConfig {
        machine: MachineConfig {
            policy,
            ..MachineConfig::adaptive(speed_fps, human_seats, local_seat)
        },
        ids,
        timing_layout: TimingLayout::TiberianSun {
            fog_bias: c.timing_fog_bias,
        },
        report_layout,
        rules: EngineRules {
            tick_timer,
            send_order,
        },
    })
}

/// Fill `config` with the defaults: `struct_size` set,
/// `RUNGS_POLICY_ADAPTIVE`, `RUNGS_REPORT_LAYOUT_COMPACT`,
/// `RUNGS_SEND_AFTER_EXECUTE`, `tick_hz` 0 (you pace in µs), no fog bias,
/// no LATENCYFUDGE event (`RUNGS_NO_EVENT_ID`), no callbacks. The TIMING and
/// NETWORK_REPORT event IDs are `RUNGS_NO_EVENT_ID`, which
/// `rungs_session_new` refuses: they are your game's (a zeroed config would
/// say 0, an event of most games), as are `speed_fps`, `seat_count`,
/// `local_seat` and `human_seat_mask`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if config is NULL; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_config_init(
    config: *mut rungs_session_config,
) -> rungs_result {
    call("rungs_session_config_init", || {
        // SAFETY: every field is valid zeroed (integers, NULL pointers, no
        // callbacks); the fields whose default is not 0 are set below.
        let mut defaults: rungs_session_config = unsafe { std::mem::zeroed() };
        defaults.struct_size = std::mem::size_of::<rungs_session_config>() as u32;
        defaults.timing_event_id = RUNGS_NO_EVENT_ID;
        defaults.network_report_event_id = RUNGS_NO_EVENT_ID;
        defaults.latency_fudge_event_id = RUNGS_NO_EVENT_ID;
        defaults.report_layout = super::payload::RUNGS_REPORT_LAYOUT_COMPACT;
        defaults.send_order = RUNGS_SEND_AFTER_EXECUTE;
        // SAFETY: NULL (refused) or valid for writes by the caller's contract.
        unsafe { write_to(config, "config", defaults) }
    })
}

/// Make a session for the eve of frame 0; `*out` is written only on success.
///
/// A configuration that can never work is refused, and the message
/// (`rungs_last_error_message`) names the field: a playing machine
/// (`local_seat` a human seat) needs `callbacks.queue_event` and
/// `callbacks.send_frame`; an observer (`RUNGS_NO_SEAT`) may leave them NULL.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `config` or `out` is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if `config->struct_size` is smaller than the
/// struct before `tick_hz` (older callers get `tick_hz` and `send_order` 0),
/// `config->policy` is not a `RUNGS_POLICY_*`, `send_order` is not a
/// `RUNGS_SEND_*`, `speed_fps` is 0, `seat_count`
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
    call("rungs_session_new", || {
        require(out, "out")?;
        // SAFETY: read_grown_config checks NULL and struct_size before reading
        // the rest; every field is valid zeroed.
        let config = unsafe { read_grown_config(config, "config", session_config_v1_size()) }?;
        let session = EngineSession::new(&session_config(&config)?)?;
        let status = Published::new(fill_status(session.machine()));
        let object = SessionObject {
            session,
            callbacks: config.callbacks,
        };
        let lent = rungs_measurements::lent_by(std::ptr::null());
        let session = Box::into_raw(Box::new(rungs_session(Guarded::new(object), status, lent)));
        // SAFETY: just made and not yet handed out, so nothing else refers
        // to it; the lent handle points back at its final address.
        unsafe { (*session).2 = rungs_measurements::lent_by(session) };
        // SAFETY: `out` is non-NULL (checked) and writable.
        unsafe { write_out(out, session) };
        Ok(())
    })
}

/// Release a session. NULL is accepted.
///
/// Returns: RUNGS_OK (also for NULL); RUNGS_ERR_REENTRANT if called from
/// inside one of the session's own callbacks; RUNGS_ERR_BUSY while another
/// thread is in a call on it (not freed); RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_free(s: *mut rungs_session) -> rungs_result {
    // SAFETY: NULL or a live session from `_new`.
    unsafe { free_call("rungs_session_free", s) }
}

/// Start `frame` (0, 1, 2, ... without gaps). `*out_executes_commands` (may
/// be NULL) is 1 when this frame executes commands: execute every queued
/// event tagged at or before it that has not run (`rungs_session_due_tags`
/// gives the tags this frame runs), in one order that is the same on every
/// machine — (tag, seat, issue order), or an exact-frame DoList's own, house
/// by house and each house's in packet order — handing rungs' events to
/// `rungs_session_event_executed`. Before executing, make
/// sure the frame is ready (`rungs_session_peers_ready`). With
/// `config->send_order = RUNGS_SEND_BEFORE_EXECUTE` the `send_frame`
/// callback of a sending frame comes from this call, and a frame executes
/// exactly when it sends.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` is NULL; RUNGS_ERR_STATE if
/// the previous frame is still running (call `rungs_session_frame_end`) or
/// `frame` is not the next frame.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_frame_begin(
    s: *mut rungs_session,
    frame: u32,
    out_executes_commands: *mut i32,
) -> rungs_result {
    unsafe {
        session_call("rungs_session_frame_begin", s, |session| {
            let executes = session.frame_begin(frame)?;
            write_optional(out_executes_commands, i32::from(executes));
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
/// Ask after `rungs_session_frame_end` of `frame - 1` (or during `frame`;
/// with `RUNGS_SEND_BEFORE_EXECUTE`, also for `frame + 1` once `frame` has
/// begun); the answer is the same on every machine.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` or `out_send_frame` is
/// NULL; RUNGS_ERR_STATE if `frame - 1` has not ended (its send frames are not
/// final yet) or `frame` is more than 256 frames before that.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_required_send_frame(
    s: *mut rungs_session,
    frame: u32,
    out_send_frame: *mut u32,
) -> rungs_result {
    unsafe {
        session_call("rungs_session_required_send_frame", s, |session| {
            require(out_send_frame, "out_send_frame")?;
            let needed = session.required_send_frame(frame)?;
            write_out(out_send_frame, needed.unwrap_or(RUNGS_NO_FRAME));
            Ok(())
        })
    }
}

/// Frame readiness (S5) from what you hold: `held_send_frames[seat]` is the
/// latest send frame you hold from `seat` *with every packet before it*
/// (`RUNGS_NO_FRAME` for none yet), for every seat `0 .. seat_count - 1`
/// (`count` must be `seat_count`). Only peers are read: entries of your own
/// seat, AI seats and removed players are ignored. `*out_ready` is 1 when
/// `frame` may execute, i.e. every peer's entry is at or after
/// `rungs_session_required_send_frame`. On a transport that can deliver a
/// later packet before an earlier one, use `rungs_session_packet_received`
/// and `rungs_session_peers_ready`, which keep that watermark for you.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` or `out_ready` is NULL, or
/// `held_send_frames` is NULL while `count` is not 0;
/// RUNGS_ERR_INVALID_ARGUMENT if `count` is not the session's `seat_count`, or
/// a peer's entry is a frame that ended here without being a send frame (a tag
/// passed for a send frame); RUNGS_ERR_STATE as for
/// `rungs_session_required_send_frame`.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_frame_ready(
    s: *mut rungs_session,
    frame: u32,
    held_send_frames: *const u32,
    count: usize,
    out_ready: *mut i32,
) -> rungs_result {
    unsafe {
        session_call("rungs_session_frame_ready", s, |session| {
            let held = slice_in(held_send_frames, count, "held_send_frames")?;
            require(out_ready, "out_ready")?;
            let seat_count = session.machine().seat_count();
            if count != usize::from(seat_count) {
                return Err(Error::invalid_value(
                    "count",
                    count,
                    format!("config->seat_count {seat_count}"),
                )
                .into());
            }
            let ready = session.frame_ready(frame, |seat| {
                let entry = held[usize::from(seat)];
                (entry != RUNGS_NO_FRAME).then_some(entry)
            })?;
            write_out(out_ready, i32::from(ready));
            Ok(())
        })
    }
}

/// One of rungs' events executed on `frame` (the current frame), sent by
/// `seat`: TIMING and NETWORK_REPORT are applied, LATENCYFUDGE is ignored. A
/// report from a player already removed is a late event of normal play: it
/// is accepted and changes nothing (S3). A refused event changes nothing.
///
/// Returns: RUNGS_OK (also for a late report); RUNGS_ERR_NULL_POINTER if `s` is
/// NULL, or `payload` is NULL while `len` is not 0; RUNGS_ERR_STATE if no frame
/// is running or `frame` is not the current frame; RUNGS_ERR_UNREGISTERED_EVENT
/// if `type_id` is none of the configured event IDs; RUNGS_ERR_MALFORMED if the
/// payload has the wrong size or content for its layout; RUNGS_ERR_UNKNOWN_SEAT
/// if `seat` never was a human seat of the game.
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
        session_call("rungs_session_event_executed", s, |session| {
            let payload = slice_in(payload, len, "payload")?;
            session
                .event_executed(type_id, seat, frame, payload)
                .map_err(CallError::from)
        })
    }
}

/// Your removal of `seat` executed on the current frame (S3); removing the
/// master hands the role to the next human in house order (S4.6). A second
/// removal of a seat already removed (every machine may issue one for the
/// same lost player) is accepted and changes nothing. From then on no event
/// of that seat may execute in your queue: packets it sent after the one
/// carrying its removal reached some machines and not others, and no
/// machine waits for them (docs/ts-integration.md, "A player who quits").
///
/// Returns: RUNGS_OK (also for a repeated removal); RUNGS_ERR_NULL_POINTER if
/// `s` is NULL; RUNGS_ERR_STATE if no frame is running; RUNGS_ERR_UNKNOWN_SEAT
/// if `seat` never was a human seat of the game.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_player_removed(
    s: *mut rungs_session,
    seat: u8,
) -> rungs_result {
    unsafe {
        session_call("rungs_session_player_removed", s, |session| {
            session.player_removed(seat).map_err(CallError::from)
        })
    }
}

/// End the current frame: your report on report frames (32, 64, then every
/// 128), the master's evaluation, and on a send frame the `send_frame`
/// callback. Events to queue arrive through `queue_event` before it.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` is NULL; RUNGS_ERR_STATE if
/// no frame is running (call `rungs_session_frame_begin`).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_frame_end(s: *mut rungs_session) -> rungs_result {
    unsafe { session_call("rungs_session_frame_end", s, |s| Ok(s.frame_end()?)) }
}

/// The frame a command you issue now will execute on or after (S5): exact on
/// a send frame before `frame_end`, else a forecast for the next send frame;
/// the tag given to `send_frame` is the final one.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` or `out_frame` is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_submit_command(
    s: *mut rungs_session,
    out_frame: *mut u32,
) -> rungs_result {
    unsafe {
        session_call("rungs_session_submit_command", s, |session| {
            write_to(out_frame, "out_frame", session.submit_command()?)
        })
    }
}

/// The session's measurements, lent: `*out` receives a handle on which the
/// engine calls the ordinary `rungs_measurements_*` verbs for what only it
/// can measure — its frames' work (`_frame_work_begin` / `_end`,
/// `_add_frame_work_us`, `_add_frame_ticks`), its waits for other players
/// (`_wait_begin`, `_wait_begin_for`, `_wait_end`, `_add_wait_us`,
/// `_add_wait_for_us`) and its frames' needs (`_add_frame_need`). The
/// session reads them into its reports. The handle is the same on every
/// call and valid while the session lives; using it after
/// `rungs_session_free` is undefined, as for any freed handle.
///
/// Calls through it enter this session's guard: from inside one of the
/// session's callbacks they return RUNGS_ERR_REENTRANT, while another
/// thread is in a call on the session RUNGS_ERR_BUSY, and a poisoned
/// session's RUNGS_ERR_POISONED. What the session does itself is refused
/// with RUNGS_ERR_STATE: the peers (`_add_peer`, `_remove_peer`), their
/// round trips (`_add_rtt_sample`, `_add_rtt_ticks`: use
/// `rungs_session_rtt_sample`, `_rtt_sample_ticks`, `_sample_links`, which
/// know the game's seats) and the report (`_take_report`).
/// `rungs_measurements_free` on it is refused too (RUNGS_ERR_STATE):
/// it is released with the session.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` or `out` is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_measurements(
    s: *mut rungs_session,
    out: *mut *mut rungs_measurements,
) -> rungs_result {
    unsafe {
        object_call("rungs_session_measurements", s, |_| {
            // SAFETY: the guard let this call in, so `s` is live; the lent
            // handle is never written after `rungs_session_new`.
            let lent = std::ptr::addr_of!((*s).2).cast_mut();
            write_to(out, "out", lent)
        })
    }
}

/// A round trip to `peer` in ms; `clean` is 1 when it was measured on a
/// packet sent once, 0 for a retransmitted one (it then never replaces a
/// measured value, S3/S8). Only other human players are peers.
/// A sample from a player already removed (its acknowledgement was on its
/// way) is a late event of normal play: accepted, it changes nothing (S3).
///
/// Returns: RUNGS_OK (also for a removed player); RUNGS_ERR_NULL_POINTER if `s`
/// is NULL; RUNGS_ERR_INVALID_ARGUMENT if `clean` is not 0 or 1;
/// RUNGS_ERR_UNKNOWN_SEAT if `peer` is not another human player of the game
/// (your own seat, an AI seat or no seat).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_rtt_sample(
    s: *mut rungs_session,
    peer: u8,
    rtt_ms: u32,
    clean: i32,
) -> rungs_result {
    unsafe {
        session_call("rungs_session_rtt_sample", s, |session| {
            session
                .rtt_sample(peer, rtt_ms, flag(clean, "clean")?)
                .map_err(CallError::from)
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
/// RUNGS_ERR_STATE if the endpoint's transport worker failed to stop.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_sample_links(
    s: *mut rungs_session,
    endpoint: *mut super::transport::rungs_endpoint,
    now_us: u64,
) -> rungs_result {
    unsafe {
        session_call("rungs_session_sample_links", s, |session| {
            require(endpoint, "endpoint")?;
            // SAFETY: non-NULL and live by contract; the endpoint has its own guard.
            for (seat, link) in super::transport::link_report_rtts(endpoint, now_us)? {
                session.sample_link(seat, link);
            }
            Ok(())
        })
    }
}

/// Change the game speed's cap, 1–255 (call on every machine on the same frame).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if `speed_fps` is 0.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_set_speed(
    s: *mut rungs_session,
    speed_fps: u8,
) -> rungs_result {
    unsafe {
        session_call("rungs_session_set_speed", s, |session| {
            session
                .set_speed_fps(in_range(speed_fps, 1, 255, "speed_fps")?)
                .map_err(CallError::from)
        })
    }
}

/// Timing, target, tier, master and evaluation state, for a UI or log:
/// the copy the session published when its latest call returned. Callable
/// from any thread, and from inside the session's own callbacks, while
/// another thread is in a call on the session: it never enters the session,
/// so the game thread's calls are never refused with RUNGS_ERR_BUSY because
/// of it. The handle must stay alive (not freed) while this runs.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` or `out` is NULL;
/// RUNGS_ERR_POISONED; RUNGS_ERR_PANIC. Never RUNGS_ERR_BUSY or
/// RUNGS_ERR_REENTRANT.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_status(
    s: *mut rungs_session,
    out: *mut rungs_timing_status,
) -> rungs_result {
    // SAFETY: NULL or live by contract.
    unsafe { read_status("rungs_session_status", s, out) }
}

/// Point the callbacks' `user` (the first argument of every callback,
/// `config->callbacks.user` at `rungs_session_new`) at `user` from now on:
/// e.g. at a struct that holds this handle, so a callback can reach it
/// (a callback may read `rungs_session_status`; other calls on the same
/// session from inside its callbacks return RUNGS_ERR_REENTRANT).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_set_user(
    s: *mut rungs_session,
    user: *mut c_void,
) -> rungs_result {
    // SAFETY: NULL or a live session (caller contract); the guard checks NULL.
    unsafe {
        object_call("rungs_session_set_user", s, |object| {
            object.callbacks.user = user;
            Ok(())
        })
    }
}

/// A packet from `seat` arrived (call it for every copy, in any order):
/// its packet number — 0 for the packet of send frame 0, then one more per
/// send frame, numbered by its sender — and the send frame it carries (the
/// `send_frame` argument its sender's callback got, not the tag). rungs keeps
/// the contiguous watermark per peer that frame readiness needs
/// (`rungs_session_peers_ready`): a transport that resends a lost packet
/// after later ones cannot make a frame run early. Copies are accepted;
/// packets from a player already removed are ignored (they were in flight).
///
/// A packet that cannot be right is refused and changes nothing: its send
/// frame is not the game's `packet_number`-th (checked when this machine
/// has reached that send frame; earlier, it must come after every send frame
/// this machine has had, and one that turns out wrong later makes every
/// `rungs_session_peers_ready` fail), it says another send frame than its
/// first copy, or it is past the seat's cut.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if `seat` is your own seat, or the send frame is
/// not the one `packet_number` says; RUNGS_ERR_UNKNOWN_SEAT if `seat` never was
/// a human player of the game; RUNGS_ERR_FULL if the packet is more than 512
/// packets past what this machine has checked (nothing is recorded: keep the
/// packet and hand it again after your next frames; only a machine nobody waits
/// for, an observer, falls that far behind); RUNGS_ERR_STATE if it is past the
/// seat's cut (`rungs_session_peer_cut`).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_packet_received(
    s: *mut rungs_session,
    seat: u8,
    packet_number: u32,
    send_frame: u32,
) -> rungs_result {
    unsafe {
        session_call("rungs_session_packet_received", s, |session| {
            session
                .packet_received(seat, packet_number, send_frame)
                .map_err(CallError::from)
        })
    }
}

/// Whether the current frame (after `rungs_session_frame_begin`) may
/// execute its events: `*out_ready` is 1 when every peer's packets through
/// the last send frame tagged at or before it are here, from what
/// `rungs_session_packet_received` was given, and always for a frame that
/// executes nothing. Otherwise `*out_waiting_for` (may be NULL) is the first
/// peer in house order still missing one — pass it to
/// `rungs_measurements_wait_begin_for` on the session's measurements
/// (`rungs_session_measurements`) — else `RUNGS_NO_SEAT`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` or `out_ready` is NULL;
/// RUNGS_ERR_STATE if no frame is running; RUNGS_ERR_INVALID_ARGUMENT if a
/// packet received before this machine reached its send frame turned out not to
/// carry it (the message names seat, packet and send frames: the engine numbers
/// its packets or passes its send frames wrongly, and executing would desync).
#[no_mangle]
pub unsafe extern "C" fn rungs_session_peers_ready(
    s: *mut rungs_session,
    out_ready: *mut i32,
    out_waiting_for: *mut u8,
) -> rungs_result {
    unsafe {
        session_call("rungs_session_peers_ready", s, |session| {
            require(out_ready, "out_ready")?;
            let readiness = session.peers_ready()?;
            write_out(out_ready, i32::from(readiness.ready));
            write_optional(
                out_waiting_for,
                readiness.waiting_for.unwrap_or(super::types::RUNGS_NO_SEAT),
            );
            Ok(())
        })
    }
}

/// The tags that execute on the current frame: `*out_first` to
/// `*out_last` (inclusive; `*out_last` is the frame itself), every tag after
/// the previous executing frame — a command executes on the first executing
/// frame at or after its tag (S5). An engine that runs an event only on its
/// exact frame (Tiberian Sun's DoList) restamps its unexecuted events tagged
/// in this range to the current frame before executing, and keeps its fatal
/// "too late" check for anything older: after `rungs_session_peers_ready`
/// said ready it never fires. Both are `RUNGS_NO_FRAME` when the current
/// frame executes nothing.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s`, `out_first` or `out_last`
/// is NULL; RUNGS_ERR_STATE if no frame is running.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_due_tags(
    s: *mut rungs_session,
    out_first: *mut u32,
    out_last: *mut u32,
) -> rungs_result {
    unsafe {
        session_call("rungs_session_due_tags", s, |session| {
            require(out_first, "out_first")?;
            require(out_last, "out_last")?;
            session.running_frame("due tags are asked for the running frame")?;
            let (first, last) = session
                .due_tags()
                .unwrap_or((RUNGS_NO_FRAME, RUNGS_NO_FRAME));
            write_out(out_first, first);
            write_out(out_last, last);
            Ok(())
        })
    }
}

/// `*out_packet` is the contiguous watermark of `seat`'s packets here: the
/// last packet number held with every one before it, or `RUNGS_NO_PACKET`
/// before packet 0. What your drop procedure votes for a vanished player.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` or `out_packet` is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if `seat` is your own; RUNGS_ERR_UNKNOWN_SEAT if
/// it never was a human player.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_packet_watermark(
    s: *mut rungs_session,
    seat: u8,
    out_packet: *mut u32,
) -> rungs_result {
    unsafe {
        session_call("rungs_session_packet_watermark", s, |session| {
            require(out_packet, "out_packet")?;
            session.check_peer_seat(seat)?;
            let mark = session.packet_watermark(seat).unwrap_or(RUNGS_NO_PACKET);
            write_out(out_packet, mark);
            Ok(())
        })
    }
}

/// Your drop procedure agreed where a vanished `seat`'s packets end (S4.7:
/// the engine decides removals): packets through `last_packet` count
/// (`RUNGS_NO_PACKET`: none). Frames that would need a later packet of it no
/// longer wait for it; execute its removal on the first of them
/// (`rungs_session_cut_tag`), and later packets of it are refused.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if `seat` is your own, or packets past
/// `last_packet` are already held here with every one before them (a cut is at
/// least every survivor's watermark); RUNGS_ERR_UNKNOWN_SEAT if `seat` never
/// was a human player; RUNGS_ERR_STATE if another cut was set for it.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_peer_cut(
    s: *mut rungs_session,
    seat: u8,
    last_packet: u32,
) -> rungs_result {
    unsafe {
        session_call("rungs_session_peer_cut", s, |session| {
            let last = (last_packet != RUNGS_NO_PACKET).then_some(last_packet);
            session.peer_cut(seat, last).map_err(CallError::from)
        })
    }
}

/// `*out_tag` is the tag of the first send frame after a cut ending a
/// stream at `last_packet` (`RUNGS_NO_PACKET`: before its first packet):
/// stamp the vanished player's removal with it, so it executes on the first
/// frame that would have needed a packet past the cut — a frame no machine
/// can have run. `RUNGS_NO_FRAME` until this machine has had that send frame
/// (ask again after the next frames).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if `s` or `out_tag` is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_cut_tag(
    s: *mut rungs_session,
    last_packet: u32,
    out_tag: *mut u32,
) -> rungs_result {
    unsafe {
        session_call("rungs_session_cut_tag", s, |session| {
            require(out_tag, "out_tag")?;
            let last = (last_packet != RUNGS_NO_PACKET).then_some(last_packet);
            write_out(out_tag, session.cut_tag(last).unwrap_or(RUNGS_NO_FRAME));
            Ok(())
        })
    }
}

/// A round trip to `peer` in whole ticks of your timer (`config->tick_hz`),
/// as Tiberian Sun measures one: from a command-carrying packet's first send
/// to its acknowledgement. `resent` is 1 when that packet went out more than
/// once: the sample is then not clean (S8) and never replaces a measured
/// value; 0 when it went out once.
///
/// A sample from a player already removed is accepted and changes nothing,
/// as for `rungs_session_rtt_sample`.
///
/// Returns: RUNGS_OK (also for a removed player); RUNGS_ERR_NULL_POINTER if `s`
/// is NULL; RUNGS_ERR_INVALID_ARGUMENT if `resent` is not 0 or 1;
/// RUNGS_ERR_STATE if the session has no tick timer (`config->tick_hz` 0);
/// RUNGS_ERR_UNKNOWN_SEAT if `peer` is not another human player of the game.
#[no_mangle]
pub unsafe extern "C" fn rungs_session_rtt_sample_ticks(
    s: *mut rungs_session,
    peer: u8,
    ticks: u32,
    resent: i32,
) -> rungs_result {
    unsafe {
        session_call("rungs_session_rtt_sample_ticks", s, |session| {
            session
                .rtt_sample_ticks(peer, ticks, flag(resent, "resent")?)
                .map_err(CallError::from)
        })
    }
}
