//! C types that more than one part of the C API uses: the plain structs of a
//! timing, a timing event and a report, and the shared input helpers.
//! Conversions to the Rust types validate every field, so C can never hand
//! the library a value the Rust types forbid.

use super::guard::require;
use crate::error::{Error, Result};
use crate::report::Report;
use crate::timing::{Timing, TimingEvent};

/// Seat value meaning "no seat" (an observer's local seat, or no master).
pub const RUNGS_NO_SEAT: u8 = 0xFF;

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
    type Error = Error;
    fn try_from(t: rungs_timing) -> Result<Timing> {
        Timing::new(t.send_period, t.look_ahead)
    }
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
    type Error = Error;

    /// `InvalidArgument` for a timing that breaks S1 or a frame rate of 0.
    fn try_from(event: rungs_timing_event) -> Result<TimingEvent> {
        if event.fps == 0 {
            return Err(Error::InvalidArgument("frame rate must be 1..=255"));
        }
        Ok(TimingEvent {
            target: Timing::new(event.send_period, event.look_ahead)?,
            fps: event.fps,
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
    type Error = Error;

    /// `InvalidArgument` when `has_worst_rtt` is neither 0 nor 1.
    fn try_from(report: rungs_report) -> Result<Report> {
        let has_worst_rtt = flag(report.has_worst_rtt, "has_worst_rtt must be 0 or 1")?;
        Ok(Report {
            process_us: report.process_us,
            max_wait_ms: report.max_wait_ms,
            worst_rtt_ms: has_worst_rtt.then_some(report.worst_rtt_ms),
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

/// A C yes/no flag: 0 or 1, anything else refused with `rule` (README, "ABI rules":
/// no `bool` across the boundary, every enum-like input validated).
pub(crate) fn flag(value: u8, rule: &'static str) -> Result<bool> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(Error::InvalidArgument(rule)),
    }
}

/// The human flag of every seat, from a config's `seat_count` (1–16) and
/// `human_seat_mask` (bit `i`: seat `i` is human; no bits beyond the count).
pub(crate) fn human_seats(seat_count: u8, human_seat_mask: u32) -> Result<Vec<bool>> {
    let seats = usize::from(seat_count);
    if seats == 0 || seats > crate::report::record::MAX_SEATS {
        return Err(Error::InvalidArgument("seat_count must be 1..=16"));
    }
    if human_seat_mask >> seats != 0 {
        return Err(Error::InvalidArgument(
            "human_seat_mask has bits beyond seat_count",
        ));
    }
    Ok((0..seats)
        .map(|s| human_seat_mask & (1 << s) != 0)
        .collect())
}

/// Copy a config struct whose first field is `uint32_t struct_size` out from
/// behind `ptr`. The size is checked before the rest is read: a caller built
/// against an older, smaller struct is refused instead of read past its end;
/// a newer, larger one is accepted and its extra fields are ignored.
///
/// # Safety
/// `ptr` is NULL or valid for reads of `struct_size` bytes.
pub(crate) unsafe fn read_config<T: Copy>(ptr: *const T, name: &'static str) -> Result<T> {
    require(ptr, name)?;
    // SAFETY: every config struct starts with a u32 struct_size; ptr is readable.
    let struct_size = unsafe { ptr.cast::<u32>().read_unaligned() };
    if (struct_size as usize) < std::mem::size_of::<T>() {
        return Err(Error::InvalidArgument(
            "struct_size is smaller than this library's config struct",
        ));
    }
    // SAFETY: the caller vouches for struct_size >= size_of::<T>() readable bytes.
    Ok(unsafe { ptr.read() })
}

/// Copy a C input struct out from behind a pointer, refusing NULL with `name`.
///
/// # Safety
/// `ptr` is NULL or valid for reads of `T`.
pub(crate) unsafe fn read_in<T: Copy>(ptr: *const T, name: &'static str) -> Result<T> {
    require(ptr, name)?;
    // SAFETY: non-NULL (checked) and valid for reads by the caller's contract.
    Ok(unsafe { ptr.read() })
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
                Err(Error::InvalidArgument(_))
            ));
        }
    }

    #[test]
    fn report_round_trip_flag_is_strict() {
        let none = Report {
            process_us: 5,
            max_wait_ms: 6,
            worst_rtt_ms: None,
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
            Err(Error::InvalidArgument(_))
        ));
    }
}
