//! C types that more than one part of the C API uses: the plain structs of a
//! timing and a timing event (the report has its own module, `report.rs`),
//! one typedef per callback signature,
//! and the validation of the seat fields every game config has.
//! Conversions to the Rust types validate every field, so C can never hand
//! the library a value the Rust types forbid.

use std::ffi::c_void;

use super::args::{in_range, read_in};
use super::result::{CallError, Result};
use crate::error::Error;
use crate::report::MAX_SEATS;
use crate::timing::{PolicyKind, Timing, TimingEvent};

/// A tier of the timing ladder, one of `RUNGS_TIER_*` (S6).
pub type rungs_tier = u8;

/// A log line's level, one of `RUNGS_LOG_*`.
pub type rungs_log_level = u8;

/// What happened to a link, one of `RUNGS_LINK_EVENT_*`.
pub type rungs_link_event = u32;

/// Seat value meaning "no seat" (an observer's local seat, or no master).
pub const RUNGS_NO_SEAT: u8 = 0xFF;

// One typedef per callback signature: every config struct that takes a
// callback of a shape names it with one of these. Each runs synchronously
// on the thread that made the call that caused it, takes the config's
// `user` pointer first, and may be NULL (not called). Two pairs have the
// same C shape but different meanings, so they stay separate names:
// `rungs_frame_rate_changed_fn` / `rungs_seat_event_fn` (frame, then a u8)
// and `rungs_desync_fn` / `rungs_send_frame_fn` (two u32s); a program can
// tell from the field's type what its arguments mean.

/// The timing in force became `send_period`/`look_ahead` on `frame` (also
/// reported on frame 0).
pub type rungs_timing_changed_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, frame: u32, send_period: u8, look_ahead: u8)>;
/// The frame rate to pace at became `fps` from `frame` on (also reported on
/// frame 0).
pub type rungs_frame_rate_changed_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, frame: u32, fps: u8)>;
/// A message for the player's message list on `frame`, e.g.
/// `Connection quality target: Normal` (S6); `tier` is a `RUNGS_TIER_*`.
/// `text` lives until the callback returns.
pub type rungs_player_message_fn = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        frame: u32,
        tier: rungs_tier,
        text: *const libc::c_char,
    ),
>;
/// Something happened to `seat` on `frame`: the master role moved to it
/// (`RUNGS_NO_SEAT` when no human is left), or it was removed; which one is
/// the config field's name.
pub type rungs_seat_event_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, frame: u32, seat: u8)>;
/// Engine session: queue an event of `type_id` with `len` payload bytes into
/// your own network stream, from your seat; it goes out with your next
/// packet and is stamped with that send's tag (the `send_frame` callback's),
/// like your own commands. `frame` is the frame that queued it (the current
/// one), for logs: it is not the event's tag. `len` is the length your event
/// length table must hold for `type_id`. `payload` lives until the callback
/// returns.
pub type rungs_queue_event_fn = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        frame: u32,
        type_id: u8,
        payload: *const u8,
        len: usize,
    ),
>;
/// Engine session: send frame `send_frame`: flush your packet now, stamping
/// every event collected since the previous send frame (yours and the queued
/// ones) with `tag` (S5), and put `send_frame` in the packet (Tiberian Sun's
/// FRAMEINFO carries it as `Frame` = `tag`, `Delay` = `tag - send_frame`)
/// with your packet number (0 for send frame 0's packet, one more per send
/// frame): the receiver hands both to `rungs_session_packet_received`.
/// Frame readiness counts packets by send frame, because two consecutive
/// send frames can carry the same tag.
pub type rungs_send_frame_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, send_frame: u32, tag: u32)>;
/// A log line at `level` (`RUNGS_LOG_*`); `text` lives until the callback returns.
pub type rungs_log_fn = Option<
    unsafe extern "C" fn(user: *mut c_void, level: rungs_log_level, text: *const libc::c_char),
>;
/// Lockstep: a command issued by `seat` executes on `frame`; apply it to
/// your simulation now. `bytes` lives until the callback returns.
pub type rungs_command_fn = Option<
    unsafe extern "C" fn(user: *mut c_void, frame: u32, seat: u8, bytes: *const u8, len: usize),
>;
/// Lockstep: state checksums for `frame` differ; bit `i` of `seats` is set
/// for each seat whose value differs from the lowest seat's.
pub type rungs_desync_fn = Option<unsafe extern "C" fn(user: *mut c_void, frame: u32, seats: u32)>;
/// The link to `seat` had a `RUNGS_LINK_EVENT_*` event: lost (nothing heard
/// for the liveness timeout; the engine decides whether to remove the
/// player), recovered, or the peer restarted. Runs on the thread that called
/// `rungs_endpoint_poll` or `rungs_lockstep_update`.
pub type rungs_link_event_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, seat: u8, event: rungs_link_event)>;

/// A timing `send_period/look_ahead` (S1). Valid when
/// `1 <= send_period <= 10`, `send_period <= look_ahead <= 250` and
/// `look_ahead % send_period == 0`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct rungs_timing {
    pub send_period: u8,
    pub look_ahead: u8,
}

impl From<Timing> for rungs_timing {
    fn from(t: Timing) -> Self {
        rungs_timing {
            send_period: t.send_period(),
            look_ahead: t.look_ahead(),
        }
    }
}

impl TryFrom<rungs_timing> for Timing {
    type Error = CallError;
    /// `Invalid` naming both fields when the pair breaks S1.
    fn try_from(t: rungs_timing) -> Result<Timing> {
        timing_of(t.send_period, t.look_ahead, "timing")
    }
}

/// The timing `send_period/look_ahead` of the C struct `name`, refused with
/// both numbers and the rule when it breaks S1.
fn timing_of(send_period: u8, look_ahead: u8, name: &str) -> Result<Timing> {
    Timing::new(send_period, look_ahead)
        .map_err(|_| {
            Error::invalid_value(
                name.to_string(),
                format!("send_period {send_period}, look_ahead {look_ahead}"),
                "send_period 1 to 10 and look_ahead a multiple of send_period from \
                 send_period to 250",
            )
        })
        .map_err(CallError::from)
}

/// Read the C timing `name` from behind `ptr` and check it (S1).
///
/// # Safety
/// `ptr` is NULL or valid for reads.
pub(crate) unsafe fn read_timing(ptr: *const rungs_timing, name: &'static str) -> Result<Timing> {
    // SAFETY: forwarded contract.
    let t = unsafe { read_in(ptr, name) }?;
    timing_of(t.send_period, t.look_ahead, name)
}

/// A TIMING event's content (S4): the target timing and the frame rate
/// every machine paces at.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct rungs_timing_event {
    /// Frames per packet, 1–10.
    pub send_period: u8,
    /// Frames between a send frame and the execution of its commands:
    /// `send_period`–250 and a multiple of `send_period` (S1).
    pub look_ahead: u8,
    /// Frames per second, 1–255.
    pub fps: u8,
}

impl TryFrom<rungs_timing_event> for TimingEvent {
    type Error = CallError;

    /// `Invalid` for a timing that breaks S1 or a frame rate of 0.
    fn try_from(event: rungs_timing_event) -> Result<TimingEvent> {
        Ok(TimingEvent {
            target: timing_of(event.send_period, event.look_ahead, "event")?,
            fps: in_range(event.fps, 1, 255, "event->fps")?,
        })
    }
}

impl From<TimingEvent> for rungs_timing_event {
    fn from(event: TimingEvent) -> rungs_timing_event {
        rungs_timing_event {
            send_period: event.target.send_period(),
            look_ahead: event.target.look_ahead(),
            fps: event.fps,
        }
    }
}

/// A game's timing policy from its C value (`RUNGS_POLICY_*`).
pub fn timing_policy(value: u8, name: &str) -> Result<PolicyKind> {
    match value {
        RUNGS_POLICY_ADAPTIVE => Ok(PolicyKind::Adaptive),
        RUNGS_POLICY_TRACKING => Ok(PolicyKind::Tracking),
        _ => Err(Error::invalid_value(
            name.to_string(),
            value,
            "RUNGS_POLICY_ADAPTIVE (0) or RUNGS_POLICY_TRACKING (1)",
        )
        .into()),
    }
}

/// A timing policy, one of `RUNGS_POLICY_*`.
pub type rungs_policy = u8;

/// Timing policy: rungs' adaptive ladder (S4), the default.
pub const RUNGS_POLICY_ADAPTIVE: rungs_policy = 0;
/// Timing policy: `tracking`, send period 1 and the look-ahead the reports
/// need (`docs/tracking.md`). Every machine of a game must use the same.
pub const RUNGS_POLICY_TRACKING: rungs_policy = 1;

/// The human flag of every seat, from a config's `seat_count` (1–16) and
/// `human_seat_mask` (bit `i`: seat `i` is human; at least one; no bits
/// beyond the count). Messages name the fields of the C config.
pub(crate) fn human_seats(seat_count: u8, human_seat_mask: u32) -> Result<Vec<bool>> {
    let seats = in_range(usize::from(seat_count), 1, MAX_SEATS, "config->seat_count")?;
    if human_seat_mask >> seats != 0 {
        return Err(Error::invalid_value(
            "config->human_seat_mask",
            format!("{human_seat_mask:#x}"),
            format!("bits only below bit {seats}, one per seat (config->seat_count is {seats})"),
        )
        .into());
    }
    if human_seat_mask == 0 {
        return Err(Error::invalid_value(
            "config->human_seat_mask",
            0u32,
            "at least one human seat",
        )
        .into());
    }
    Ok((0..seats)
        .map(|s| human_seat_mask & (1 << s) != 0)
        .collect())
}

/// A seat argument that may also be `RUNGS_NO_SEAT` (`None`): 0 to 15 or
/// 255; anything else is refused naming `name`.
pub(crate) fn seat_or_none(seat: u8, name: &str) -> Result<Option<u8>> {
    match seat {
        RUNGS_NO_SEAT => Ok(None),
        s if usize::from(s) < crate::report::MAX_SEATS => Ok(Some(s)),
        s => Err(Error::invalid_value(
            name.to_string(),
            s,
            "a seat, 0 to 15, or RUNGS_NO_SEAT (255)",
        )
        .into()),
    }
}

/// A config's `local_seat`: a human seat, or `RUNGS_NO_SEAT` (`None`) where
/// `observer_allowed`. Messages name the fields of the C config.
pub(crate) fn local_seat(
    local_seat: u8,
    humans: &[bool],
    observer_allowed: bool,
) -> Result<Option<u8>> {
    if local_seat == RUNGS_NO_SEAT && observer_allowed {
        return Ok(None);
    }
    if humans.get(usize::from(local_seat)) == Some(&true) {
        return Ok(Some(local_seat));
    }
    let human_list: Vec<String> = (0..humans.len())
        .filter(|&s| humans[s])
        .map(|s| s.to_string())
        .collect();
    let or_observer = if observer_allowed {
        " or RUNGS_NO_SEAT"
    } else {
        ""
    };
    Err(Error::invalid_value(
        "config->local_seat",
        local_seat,
        format!(
            "a human seat (set in config->human_seat_mask: {}){or_observer}",
            human_list.join(", ")
        ),
    )
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_event_converts_both_ways_and_refuses_broken_ones() {
        let c = rungs_timing_event {
            send_period: 3,
            look_ahead: 9,
            fps: 30,
        };
        let rust = TimingEvent::try_from(c).unwrap();
        assert_eq!(rungs_timing_event::from(rust), c);
        for broken in [
            rungs_timing_event { fps: 0, ..c },
            rungs_timing_event {
                look_ahead: 10,
                ..c
            },
            rungs_timing_event {
                send_period: 0,
                ..c
            },
        ] {
            assert!(matches!(
                TimingEvent::try_from(broken),
                Err(CallError::Core(Error::Invalid(_)))
            ));
        }
    }

    #[test]
    fn seat_fields_are_refused_with_got_and_expected() {
        assert_eq!(human_seats(3, 0b101).unwrap(), vec![true, false, true]);
        let message = |e: CallError| e.to_string();
        assert_eq!(
            message(human_seats(17, 1).unwrap_err()),
            "config->seat_count is 17; expected 1 to 16"
        );
        assert!(message(human_seats(5, 0x20).unwrap_err())
            .starts_with("config->human_seat_mask is 0x20; expected bits only below bit 5"));
        assert!(human_seats(4, 0).is_err());
        let humans = [true, false, true];
        assert_eq!(local_seat(2, &humans, false), Ok(Some(2)));
        assert_eq!(local_seat(RUNGS_NO_SEAT, &humans, true), Ok(None));
        assert_eq!(
            message(local_seat(1, &humans, true).unwrap_err()),
            "config->local_seat is 1; expected a human seat (set in \
             config->human_seat_mask: 0, 2) or RUNGS_NO_SEAT"
        );
        assert!(local_seat(RUNGS_NO_SEAT, &humans, false).is_err());
        assert_eq!(
            message(
                Timing::try_from(rungs_timing {
                    send_period: 3,
                    look_ahead: 10
                })
                .unwrap_err()
            ),
            "timing is send_period 3, look_ahead 10; expected send_period 1 to 10 and \
             look_ahead a multiple of send_period from send_period to 250"
        );
    }
}
