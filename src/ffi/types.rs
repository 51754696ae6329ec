//! Plain C structs shared by several parts of the C API, with validated
//! conversions to the Rust types. Fixed-width fields only, no padding.

use crate::error::{Error, Result};
use crate::report::Report;
use crate::timing::{Timing, TimingEvent};

/// `worst_rtt_ms` value meaning "no round trip" in a `rungs_report` (S3).
pub const RUNGS_NO_RTT: u32 = 0xFFFF_FFFF;

/// Seat value meaning "no seat" (an observer's local seat, or no master).
pub const RUNGS_NO_SEAT: u8 = 0xFF;

/// A timing `send_period/look_ahead` (S1). Valid when
/// `1 <= send_period <= 10`, `send_period <= look_ahead <= 250` and
/// `look_ahead % send_period == 0`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct rungs_timing {
    pub send_period: u8,
    pub look_ahead: u8,
}

/// A TIMING event's content: target timing and frame rate (1–255).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct rungs_timing_event {
    pub send_period: u8,
    pub look_ahead: u8,
    pub fps: u8,
    /// Must be 0.
    pub reserved: u8,
}

/// A player's report (S3).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct rungs_report {
    /// Average processing time per frame since the previous report, µs.
    pub process_us: u32,
    /// Longest single wait for the other players over the last two intervals, ms.
    pub max_wait_ms: u32,
    /// Worst round trip to any other player, ms, or `RUNGS_NO_RTT`.
    pub worst_rtt_ms: u32,
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

impl From<TimingEvent> for rungs_timing_event {
    fn from(e: TimingEvent) -> Self {
        rungs_timing_event {
            send_period: e.target.send_period(),
            look_ahead: e.target.look_ahead(),
            fps: e.fps,
            reserved: 0,
        }
    }
}

impl TryFrom<rungs_timing_event> for TimingEvent {
    type Error = Error;
    fn try_from(e: rungs_timing_event) -> Result<TimingEvent> {
        if e.fps == 0 {
            return Err(Error::InvalidArgument("fps must be 1..=255"));
        }
        if e.reserved != 0 {
            return Err(Error::InvalidArgument("reserved must be 0"));
        }
        Ok(TimingEvent {
            target: Timing::new(e.send_period, e.look_ahead)?,
            fps: e.fps,
        })
    }
}

impl From<Report> for rungs_report {
    fn from(r: Report) -> Self {
        rungs_report {
            process_us: r.process_us,
            max_wait_ms: r.max_wait_ms,
            worst_rtt_ms: r.worst_rtt_ms.unwrap_or(RUNGS_NO_RTT),
        }
    }
}

impl From<rungs_report> for Report {
    fn from(r: rungs_report) -> Self {
        Report {
            process_us: r.process_us,
            max_wait_ms: r.max_wait_ms,
            worst_rtt_ms: (r.worst_rtt_ms != RUNGS_NO_RTT).then_some(r.worst_rtt_ms),
        }
    }
}

/// Read a struct through a pointer that must not be NULL.
///
/// # Safety
/// `ptr` is NULL or valid for reads of `T`.
pub(crate) unsafe fn read_in<T: Copy>(ptr: *const T, name: &'static str) -> Result<T> {
    if ptr.is_null() {
        return Err(Error::NullPointer(name));
    }
    // SAFETY: non-NULL and valid by the caller's contract.
    Ok(unsafe { ptr.read() })
}
