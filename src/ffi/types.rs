//! C types that more than one part of the C API uses: the plain structs of a
//! timing, a timing event and a report, one typedef per callback signature,
//! and the validation of the seat fields every game config has.
//! Conversions to the Rust types validate every field, so C can never hand
//! the library a value the Rust types forbid.

use std::ffi::c_void;

use super::args::{flag, in_range, read_in, write_out};
use super::result::{CallError, Result};
use crate::error::Error;
use crate::report::record::MAX_SEATS;
use crate::report::{LookAheadNeeds, Report, ReportDetail};
use crate::timing::{PolicyKind, Timing, TimingEvent};
use crate::wire::events::check_detail;

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
    /// `InvalidValue` naming both fields when the pair breaks S1.
    fn try_from(t: rungs_timing) -> Result<Timing> {
        timing_of(t.send_period, t.look_ahead, "timing")
    }
}

/// The timing `send_period/look_ahead` of the C struct `name`, refused with
/// both numbers and the rule when it breaks S1.
fn timing_of(send_period: u8, look_ahead: u8, name: &str) -> Result<Timing> {
    Timing::new(send_period, look_ahead)
        .map_err(|_| {
            Error::InvalidValue(format!(
                "{name} is send_period {send_period}, look_ahead {look_ahead}; expected \
             send_period 1 to 10 and look_ahead a multiple of send_period from \
             send_period to 250"
            ))
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

    /// `InvalidValue` for a timing that breaks S1 or a frame rate of 0.
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

/// One player's report (S3), as a NETWORK_REPORT event carries it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct rungs_report {
    /// Average processing time per frame since the previous report, µs.
    pub process_us: u32,
    /// Longest single wait for the other players over the last two report
    /// intervals, ms.
    pub max_wait_ms: u32,
    /// Worst round trip to any other player, ms; meaningful only when
    /// `has_worst_rtt` is 1 (0 is written when it is not).
    pub worst_rtt_ms: u32,
    /// 1 when the report carries a round trip, 0 for none (a link lacks a
    /// clean measurement, S3). Any other value is refused.
    pub has_worst_rtt: u8,
}

impl TryFrom<rungs_report> for Report {
    type Error = CallError;

    /// `InvalidValue` when `has_worst_rtt` is neither 0 nor 1.
    fn try_from(report: rungs_report) -> Result<Report> {
        let has_worst_rtt = flag(report.has_worst_rtt, "report->has_worst_rtt")?;
        Ok(Report {
            process_us: report.process_us,
            max_wait_ms: report.max_wait_ms,
            worst_rtt_ms: has_worst_rtt.then_some(report.worst_rtt_ms),
            detail: None,
        })
    }
}

impl From<Report> for rungs_report {
    fn from(report: Report) -> rungs_report {
        rungs_report {
            process_us: report.process_us,
            max_wait_ms: report.max_wait_ms,
            worst_rtt_ms: report.worst_rtt_ms.unwrap_or(0),
            has_worst_rtt: u8::from(report.worst_rtt_ms.is_some()),
        }
    }
}

/// What a report in the detailed NETWORK_REPORT layout
/// (`RUNGS_REPORT_LAYOUT_DETAILED`) adds to its `rungs_report`: the report
/// interval's round-trip distribution and the stalls the reporter suffered,
/// what the `RUNGS_POLICY_TRACKING` policy reads (docs/tracking.md). It
/// always travels with the `rungs_report` it belongs to; the calls that take
/// or give one take or give both.
///
/// Rules (a pair that breaks one is refused, by the encoder and the timing
/// machine with RUNGS_ERR_INVALID_ARGUMENT, in bytes by the decoder with
/// RUNGS_ERR_MALFORMED): the three round trips are all present exactly when
/// the report's `has_worst_rtt` is 1, and then `median <= p90 <= worst` and
/// `latest <= worst` (compared as the layout carries them, saturated at
/// 65534); `stalled_frames <= frames`; with no stalled frame, `stall_ms` is 0
/// and `waited_for` is `RUNGS_NO_SEAT`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct rungs_report_detail {
    /// Median round trip of the interval's clean samples, per peer, the
    /// largest over peers, ms; meaningful only when `has_median_rtt` is 1.
    pub median_rtt_ms: u32,
    /// 90th percentile, the same way, ms; meaningful only when `has_p90_rtt` is 1.
    pub p90_rtt_ms: u32,
    /// The latest clean sample when the report was taken, the largest over
    /// peers, ms; meaningful only when `has_latest_rtt` is 1.
    pub latest_rtt_ms: u32,
    /// Frames the machine ran in the interval.
    pub frames: u32,
    /// Of those, the frames it had to wait for (a stall each).
    pub stalled_frames: u32,
    /// Total time it waited in the interval, ms rounded up.
    pub stall_ms: u32,
    /// 1 when `median_rtt_ms` is present, 0 for none (0 is written then).
    pub has_median_rtt: u8,
    /// 1 when `p90_rtt_ms` is present, 0 for none (0 is written then).
    pub has_p90_rtt: u8,
    /// 1 when `latest_rtt_ms` is present, 0 for none (0 is written then).
    pub has_latest_rtt: u8,
    /// The seat (0 to 15) whose turns the machine waited for longest, or
    /// `RUNGS_NO_SEAT` when it did not wait or waited for no known seat.
    pub waited_for: u8,
}

impl Default for rungs_report_detail {
    /// No round trips, nothing counted, nobody waited for.
    fn default() -> Self {
        rungs_report_detail::from(ReportDetail::default())
    }
}

impl From<ReportDetail> for rungs_report_detail {
    fn from(d: ReportDetail) -> rungs_report_detail {
        rungs_report_detail {
            median_rtt_ms: d.median_rtt_ms.unwrap_or(0),
            p90_rtt_ms: d.p90_rtt_ms.unwrap_or(0),
            latest_rtt_ms: d.latest_rtt_ms.unwrap_or(0),
            frames: d.frames,
            stalled_frames: d.stalled_frames,
            stall_ms: d.stall_ms,
            has_median_rtt: u8::from(d.median_rtt_ms.is_some()),
            has_p90_rtt: u8::from(d.p90_rtt_ms.is_some()),
            has_latest_rtt: u8::from(d.latest_rtt_ms.is_some()),
            waited_for: d.waited_for.unwrap_or(RUNGS_NO_SEAT),
        }
    }
}

/// A report with its detail, from C: every flag 0 or 1, `waited_for` a
/// seat or `RUNGS_NO_SEAT`, and the pair within the detailed layout's
/// rules (the core's, `wire::events::check_detail`). Refusals name the
/// fields of `report` and `detail` and say what was got.
pub(crate) fn detailed_report(report: rungs_report, detail: rungs_report_detail) -> Result<Report> {
    let mut rust = Report::try_from(report)?;
    let present = |value: u32, has: u8, name: &'static str| -> Result<Option<u32>> {
        Ok(flag(has, name)?.then_some(value))
    };
    let d = ReportDetail {
        median_rtt_ms: present(
            detail.median_rtt_ms,
            detail.has_median_rtt,
            "detail->has_median_rtt",
        )?,
        p90_rtt_ms: present(detail.p90_rtt_ms, detail.has_p90_rtt, "detail->has_p90_rtt")?,
        latest_rtt_ms: present(
            detail.latest_rtt_ms,
            detail.has_latest_rtt,
            "detail->has_latest_rtt",
        )?,
        frames: detail.frames,
        stalled_frames: detail.stalled_frames,
        stall_ms: detail.stall_ms,
        waited_for: seat_or_none(detail.waited_for, "detail->waited_for")?,
        needs: None,
    };
    check_detail(rust.worst_rtt_ms, &d).map_err(|rule| {
        let rtt = |value: Option<u32>| value.map_or("none".to_string(), |ms| ms.to_string());
        Error::InvalidArgument(rule).detailed(format!(
            "report and detail break a rule of the detailed layout ({rule}): got \
             report->worst_rtt_ms {}, detail->median_rtt_ms {}, detail->p90_rtt_ms {}, \
             detail->latest_rtt_ms {}, detail->frames {}, detail->stalled_frames {}, \
             detail->stall_ms {}, detail->waited_for {}",
            rtt(rust.worst_rtt_ms),
            rtt(d.median_rtt_ms),
            rtt(d.p90_rtt_ms),
            rtt(d.latest_rtt_ms),
            d.frames,
            d.stalled_frames,
            d.stall_ms,
            detail.waited_for,
        ))
    })?;
    rust.detail = Some(d);
    Ok(rust)
}

/// Look-aheads `rungs_look_ahead_needs` counts frames above: the one in
/// force and the three below it.
pub const RUNGS_NEED_LEVELS: usize = 4;
const _: () = assert!(RUNGS_NEED_LEVELS == crate::report::needs::NEED_LEVELS);

/// How much look-ahead one report interval's frames needed: what the needs
/// NETWORK_REPORT layout (`RUNGS_REPORT_LAYOUT_NEEDS`) adds to a report and
/// its `rungs_report_detail`, and what the `RUNGS_POLICY_TRACKING` policy
/// sheds its margin and checks its decreases by (docs/tracking.md, rule
/// 10). A frame *needed* the look-ahead under which its last turn would
/// still have come before it was due (`rungs_needed_look_ahead`); the
/// engine passes each frame's with `rungs_measurements_add_frame_need`.
///
/// `reference` 0 means no needs (an interval without a measured frame, or
/// an engine that does not measure them); every other field is 0 then.
/// Otherwise (a struct that breaks one is refused, by the encoder and the
/// timing machine with RUNGS_ERR_INVALID_ARGUMENT, in bytes by the decoder
/// with RUNGS_ERR_MALFORMED): `reference` and `most` are 1–250; `above`
/// never decreases from one element to the next; and `above[k]` is 0
/// exactly when `most <= reference - k`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct rungs_look_ahead_needs {
    /// `above[k]`: the interval's frames that needed more than
    /// `reference - k` frames of look-ahead (that would have stalled under
    /// it).
    pub above: [u16; RUNGS_NEED_LEVELS],
    /// The look-ahead the counts are relative to (the one the interval's
    /// last measured frame ran under), 1–250; 0 for no needs.
    pub reference: u8,
    /// The most look-ahead any frame of the interval needed, 1–250 (0 with
    /// no needs).
    pub most: u8,
}

impl From<Option<LookAheadNeeds>> for rungs_look_ahead_needs {
    fn from(needs: Option<LookAheadNeeds>) -> rungs_look_ahead_needs {
        needs.map_or_else(rungs_look_ahead_needs::default, |n| {
            rungs_look_ahead_needs {
                above: n.above,
                reference: n.reference,
                most: n.most,
            }
        })
    }
}

/// Write `report` with its detail (the worst round trip standing for the
/// distribution if it has none) into the caller's structs, and its needs
/// too when asked for (`out_needs`). The callers checked every pointer.
///
/// # Safety
/// `out`, `out_detail` and any `out_needs` are valid for writes.
pub(crate) unsafe fn write_report_with_detail(
    report: Report,
    out: *mut rungs_report,
    out_detail: *mut rungs_report_detail,
    out_needs: Option<*mut rungs_look_ahead_needs>,
) {
    let detail = report
        .detail
        .unwrap_or_else(|| ReportDetail::from_worst(report.worst_rtt_ms));
    unsafe {
        write_out(out, rungs_report::from(report));
        write_out(out_detail, rungs_report_detail::from(detail));
        if let Some(out_needs) = out_needs {
            write_out(out_needs, rungs_look_ahead_needs::from(detail.needs));
        }
    }
}

/// Needs from C: `None` for reference 0 (with every other field 0), else
/// needs within their rules. Refusals name the fields.
pub(crate) fn look_ahead_needs(needs: rungs_look_ahead_needs) -> Result<Option<LookAheadNeeds>> {
    let shown = |n: &rungs_look_ahead_needs| {
        format!(
            "got needs->reference {}, needs->most {}, needs->above {{{}, {}, {}, {}}}",
            n.reference, n.most, n.above[0], n.above[1], n.above[2], n.above[3]
        )
    };
    if needs.reference == 0 {
        if needs.most != 0 || needs.above.iter().any(|&c| c != 0) {
            return Err(Error::InvalidArgument(
                "look-ahead needs with reference 0 (none) must be all 0",
            )
            .detailed(format!(
                "needs->reference is 0 (no needs), so every other field must be 0: {}",
                shown(&needs)
            ))
            .into());
        }
        return Ok(None);
    }
    let rust = LookAheadNeeds {
        reference: needs.reference,
        most: needs.most,
        above: needs.above,
    };
    rust.check().map_err(|rule| {
        Error::InvalidArgument(rule).detailed(format!("{rule}: {}", shown(&needs)))
    })?;
    Ok(Some(rust))
}

/// A report with its detail and the interval's needs, from C (`needs`
/// `None`: a NULL pointer, no needs): [`detailed_report`]'s rules and the
/// needs' own.
pub(crate) fn report_with_needs(
    report: rungs_report,
    detail: rungs_report_detail,
    needs: Option<rungs_look_ahead_needs>,
) -> Result<Report> {
    let mut rust = detailed_report(report, detail)?;
    let needs = match needs {
        Some(needs) => look_ahead_needs(needs)?,
        None => None,
    };
    if let Some(d) = rust.detail.as_mut() {
        d.needs = needs;
    }
    Ok(rust)
}

/// A game's timing policy from its C value (`RUNGS_POLICY_*`).
pub fn timing_policy(value: u8, name: &str) -> Result<PolicyKind> {
    match value {
        RUNGS_POLICY_ADAPTIVE => Ok(PolicyKind::Adaptive),
        RUNGS_POLICY_TRACKING => Ok(PolicyKind::Tracking),
        _ => Err(Error::InvalidValue(format!(
            "{name} is {value}; expected RUNGS_POLICY_ADAPTIVE (0) or RUNGS_POLICY_TRACKING (1)"
        ))
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
        return Err(Error::InvalidValue(format!(
            "config->human_seat_mask is {human_seat_mask:#x}; expected bits only below bit \
             {seats}, one per seat (config->seat_count is {seats})"
        ))
        .into());
    }
    if human_seat_mask == 0 {
        return Err(Error::InvalidArgument(
            "config->human_seat_mask is 0; expected at least one human seat",
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
        s if usize::from(s) < crate::report::record::MAX_SEATS => Ok(Some(s)),
        s => Err(Error::InvalidValue(format!(
            "{name} is {s}; expected a seat, 0 to 15, or RUNGS_NO_SEAT (255)"
        ))
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
    Err(Error::InvalidValue(format!(
        "config->local_seat is {local_seat}; expected a human seat (set in \
         config->human_seat_mask: {}){or_observer}",
        human_list.join(", ")
    ))
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
                Err(CallError::Core(Error::InvalidValue(_)))
            ));
        }
    }

    #[test]
    fn report_round_trip_flag_is_strict() {
        let none = Report {
            process_us: 5,
            max_wait_ms: 6,
            worst_rtt_ms: None,
            detail: None,
        };
        let c = rungs_report::from(none);
        assert_eq!((c.has_worst_rtt, c.worst_rtt_ms), (0, 0));
        assert_eq!(Report::try_from(c).unwrap(), none);
        let some = rungs_report {
            worst_rtt_ms: 70,
            has_worst_rtt: 1,
            ..c
        };
        assert_eq!(Report::try_from(some).unwrap().worst_rtt_ms, Some(70));
        let bad = rungs_report {
            has_worst_rtt: 2,
            ..c
        };
        assert!(matches!(
            Report::try_from(bad),
            Err(CallError::Core(Error::InvalidValue(_)))
        ));
    }

    #[test]
    fn a_detail_converts_both_ways_and_every_broken_field_is_refused() {
        let report = rungs_report {
            process_us: 5000,
            max_wait_ms: 40,
            worst_rtt_ms: 180,
            has_worst_rtt: 1,
        };
        let rust = ReportDetail {
            median_rtt_ms: Some(120),
            p90_rtt_ms: Some(150),
            latest_rtt_ms: Some(125),
            frames: 128,
            stalled_frames: 2,
            stall_ms: 40,
            waited_for: Some(3),
            needs: None,
        };
        let detail = rungs_report_detail::from(rust);
        assert_eq!(detailed_report(report, detail).unwrap().detail, Some(rust));
        // No round trip anywhere is a valid pair too, written as 0s.
        let none = rungs_report_detail::from(ReportDetail::default());
        assert_eq!(
            (none.has_p90_rtt, none.p90_rtt_ms, none.waited_for),
            (0, 0, RUNGS_NO_SEAT)
        );
        let no_rtt = rungs_report {
            worst_rtt_ms: 0,
            has_worst_rtt: 0,
            ..report
        };
        assert_eq!(
            detailed_report(no_rtt, none).unwrap().detail,
            Some(ReportDetail::default())
        );
        let refused = |report: rungs_report, detail: rungs_report_detail| {
            detailed_report(report, detail).unwrap_err().to_string()
        };
        assert_eq!(
            refused(
                report,
                rungs_report_detail {
                    has_median_rtt: 2,
                    ..detail
                }
            ),
            "detail->has_median_rtt is 2; expected 0 or 1"
        );
        assert_eq!(
            refused(
                report,
                rungs_report_detail {
                    waited_for: 16,
                    ..detail
                }
            ),
            "detail->waited_for is 16; expected a seat, 0 to 15, or RUNGS_NO_SEAT (255)"
        );
        assert_eq!(
            refused(
                report,
                rungs_report_detail {
                    p90_rtt_ms: 119,
                    ..detail
                }
            ),
            "report and detail break a rule of the detailed layout (NETWORK_REPORT detail \
             must have median <= p90 <= worst round trip): got report->worst_rtt_ms 180, \
             detail->median_rtt_ms 120, detail->p90_rtt_ms 119, detail->latest_rtt_ms 125, \
             detail->frames 128, detail->stalled_frames 2, detail->stall_ms 40, \
             detail->waited_for 3"
        );
        for broken in [
            rungs_report_detail {
                has_latest_rtt: 0,
                ..detail
            },
            rungs_report_detail {
                latest_rtt_ms: 181,
                ..detail
            },
            rungs_report_detail {
                stalled_frames: 129,
                ..detail
            },
            rungs_report_detail {
                stalled_frames: 0,
                ..detail
            },
        ] {
            let e = detailed_report(report, broken).unwrap_err();
            assert!(matches!(e.kind(), Some(Error::InvalidArgument(_))), "{e}");
        }
        assert!(matches!(
            detailed_report(no_rtt, detail).unwrap_err().kind(),
            Some(Error::InvalidArgument(_))
        ));
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
