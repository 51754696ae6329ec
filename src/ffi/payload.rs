//! C API of the event payload codecs (S7): TIMING and NETWORK_REPORT bytes
//! for the engine's own event queue. Layouts: `docs/payloads.md`.
//!
//! Encoders write into a caller buffer and set `*out_len`; a buffer smaller
//! than the payload gets `RUNGS_ERR_BUFFER_TOO_SMALL` and nothing is written
//! (the `RUNGS_*_PAYLOAD_LEN` constants say how much to provide). Decoders
//! take exactly the payload's bytes; anything else is `RUNGS_ERR_MALFORMED`.
//! Buffers follow the C API's rule: NULL is accepted with a length of 0.

use super::args::{in_range, read_in, require, slice_in, slice_out, write_out};
use super::guard::call;
use super::report::{check_room, read_report, rungs_report, write_report, Sections};
use super::result::rungs_result;
use super::result::Result;
use super::types::rungs_timing_event;
use crate::error::Error;
use crate::timing::TimingEvent;
use crate::wire::{self, DecodeError, ReportLayout, TimingLayout};

/// A NETWORK_REPORT layout, one of `RUNGS_REPORT_LAYOUT_*`.
pub type rungs_report_layout = u8;

/// Bytes of a TIMING payload in the Tiberian Sun layout.
pub const RUNGS_TIMING_PAYLOAD_LEN: usize = 5;
/// Bytes of a TIMING payload in the Red Alert layout.
pub const RUNGS_RA_TIMING_PAYLOAD_LEN: usize = 4;
/// Bytes of a NETWORK_REPORT payload in the compact (OpenTS) layout.
pub const RUNGS_REPORT_PAYLOAD_LEN: usize = 6;
/// Bytes of a NETWORK_REPORT payload in the extended layout.
pub const RUNGS_REPORT_EXTENDED_PAYLOAD_LEN: usize = 9;
/// The `fog_bias` of an engine that keeps vanilla Tiberian Sun's quirk
/// (MaxAhead + 10 while fog of war is on); pass 0 when fog is off or the
/// quirk is gone.
pub const RUNGS_TS_FOG_BIAS: u8 = 10;
/// NETWORK_REPORT layout: OpenTS's 6 bytes, milliseconds (process time
/// rounded up).
pub const RUNGS_REPORT_LAYOUT_COMPACT: rungs_report_layout = 0;
/// NETWORK_REPORT layout: 9 bytes, version 1, process time in µs.
pub const RUNGS_REPORT_LAYOUT_EXTENDED: rungs_report_layout = 1;
/// NETWORK_REPORT layout: 22 bytes, version 2, the extended fields plus the
/// report's detail section (the round-trip distribution and the stalls by
/// seat, docs/payloads.md), what the tracking policy reads. A
/// `rungs_session` with it in `rungs_session_config.report_layout`
/// measures, encodes and decodes it itself; `rungs_report_payload_encode`
/// writes it for a report with the detail and without the needs.
pub const RUNGS_REPORT_LAYOUT_DETAILED: rungs_report_layout = 2;
/// Bytes of a NETWORK_REPORT payload in the detailed layout.
pub const RUNGS_REPORT_DETAILED_PAYLOAD_LEN: usize = 22;
/// NETWORK_REPORT layout: 32 bytes, version 3, the detailed layout's fields
/// plus the needs section, how much look-ahead the interval's frames needed
/// (`rungs_look_ahead_needs`, docs/payloads.md), what the tracking policy
/// sheds its margin and checks its decreases by. A `rungs_session` with it
/// in `rungs_session_config.report_layout` encodes and decodes it itself
/// (the engine passes each frame's need with
/// `rungs_measurements_add_frame_need` on the session's measurements);
/// `rungs_report_payload_encode` writes it for a report with the needs. The
/// lockstep session's turns carry their reports in it.
pub const RUNGS_REPORT_LAYOUT_NEEDS: rungs_report_layout = 3;
/// Bytes of a NETWORK_REPORT payload in the needs layout.
pub const RUNGS_REPORT_NEEDS_PAYLOAD_LEN: usize = 32;

// The C constants are literals (cbindgen copies them into the header); they
// must agree with the codecs.
const _: () = assert!(RUNGS_TIMING_PAYLOAD_LEN == wire::TIMING_LEN);
const _: () = assert!(RUNGS_RA_TIMING_PAYLOAD_LEN == wire::RA_TIMING_LEN);
const _: () = assert!(RUNGS_REPORT_PAYLOAD_LEN == wire::REPORT_LEN);
const _: () = assert!(RUNGS_REPORT_EXTENDED_PAYLOAD_LEN == wire::REPORT_EXTENDED_LEN);
const _: () = assert!(RUNGS_REPORT_DETAILED_PAYLOAD_LEN == wire::REPORT_DETAILED_LEN);
const _: () = assert!(RUNGS_REPORT_NEEDS_PAYLOAD_LEN == wire::REPORT_NEEDS_LEN);
const _: () = assert!(RUNGS_TS_FOG_BIAS == wire::TS_FOG_BIAS);

/// Encode `*event` as a Tiberian Sun TIMING payload (5 bytes) into `buf` of
/// `cap` bytes; `*out_len` receives the length written. `fog_bias` is added
/// to MaxAhead: `RUNGS_TS_FOG_BIAS` for an engine keeping vanilla TS's fog
/// quirk while fog is on, else 0.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if event or out_len is NULL, or
/// buf is NULL with cap above 0; RUNGS_ERR_INVALID_ARGUMENT if event breaks
/// S1 or event->fps is 0; RUNGS_ERR_BUFFER_TOO_SMALL if cap is below 5
/// (nothing written); RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_payload_encode(
    event: *const rungs_timing_event,
    fog_bias: u8,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> rungs_result {
    call("rungs_timing_payload_encode", || unsafe {
        encode_timing(
            event,
            TimingLayout::TiberianSun { fog_bias },
            buf,
            cap,
            out_len,
        )
    })
}

/// Decode a Tiberian Sun TIMING payload of `len` bytes into `*out`,
/// removing `fog_bias` from MaxAhead (the same bias the sender added).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if out is NULL, or bytes is NULL
/// with len above 0; RUNGS_ERR_MALFORMED if len is not 5, or the frame rate is
/// 0 or above 255, MaxAhead is below the bias, or the timing breaks S1;
/// RUNGS_ERR_PANIC. `*out` is written only on success.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_payload_decode(
    bytes: *const u8,
    len: usize,
    fog_bias: u8,
    out: *mut rungs_timing_event,
) -> rungs_result {
    let layout = TimingLayout::TiberianSun { fog_bias };
    call("rungs_timing_payload_decode", || unsafe {
        decode_from(bytes, len, out, layout.payload_len(), |bytes| {
            layout.decode(bytes)
        })
    })
}

/// Encode `*event` as a Red Alert TIMING payload (4 bytes, no
/// FrameSendRate) into `buf` of `cap` bytes; `*out_len` receives the length.
/// `send_period` is the session's fixed send period (1–10); the event's send
/// period must equal it, since the bytes cannot carry another one.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if event or out_len is NULL, or
/// buf is NULL with cap above 0; RUNGS_ERR_INVALID_ARGUMENT if send_period is
/// not 1 to 10, event breaks S1, event->fps is 0, or event->send_period
/// differs from send_period; RUNGS_ERR_BUFFER_TOO_SMALL if cap is below 4
/// (nothing written); RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_ra_timing_payload_encode(
    event: *const rungs_timing_event,
    send_period: u8,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> rungs_result {
    call("rungs_ra_timing_payload_encode", || unsafe {
        in_range(send_period, 1, 10, "send_period")?;
        encode_timing(
            event,
            TimingLayout::RedAlert { send_period },
            buf,
            cap,
            out_len,
        )
    })
}

/// Decode a Red Alert TIMING payload of `len` bytes into `*out`; the send
/// period is the session's `send_period` (1–10).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if out is NULL, or bytes is NULL
/// with len above 0; RUNGS_ERR_INVALID_ARGUMENT if send_period is not 1 to
/// 10; RUNGS_ERR_MALFORMED if len is not 4, or the frame rate is 0 or above
/// 255, or MaxAhead breaks S1 with that send period; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_ra_timing_payload_decode(
    bytes: *const u8,
    len: usize,
    send_period: u8,
    out: *mut rungs_timing_event,
) -> rungs_result {
    let layout = TimingLayout::RedAlert { send_period };
    call("rungs_ra_timing_payload_decode", || unsafe {
        in_range(send_period, 1, 10, "send_period")?;
        decode_from(bytes, len, out, layout.payload_len(), |bytes| {
            layout.decode(bytes)
        })
    })
}

/// Encode `*report` as a NETWORK_REPORT payload into `buf` of `cap`
/// bytes; `*out_len` receives the length. The layout is the smallest that
/// carries the report's sections: `RUNGS_REPORT_LAYOUT_NEEDS` (32 bytes)
/// when it has the needs, `RUNGS_REPORT_LAYOUT_DETAILED` (22) when it has
/// the detail alone, else `basic_layout`, the layout of your game's basic
/// reports: `RUNGS_REPORT_LAYOUT_COMPACT` (6, OpenTS's, the process time
/// rounded up to whole ms) or `RUNGS_REPORT_LAYOUT_EXTENDED` (9). Large
/// values saturate (the frames before the stalled frames, so those stay
/// within them).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if report or out_len is NULL,
/// or buf is NULL with cap above 0; RUNGS_ERR_INVALID_ARGUMENT if
/// basic_layout is neither COMPACT nor EXTENDED, report->struct_size is
/// too small, a has_ flag is neither 0 nor 1, a section breaks a rule of
/// `rungs_report_detail` or `rungs_look_ahead_needs`, or has_needs is 1
/// without has_detail; RUNGS_ERR_BUFFER_TOO_SMALL if cap is below the
/// layout's length; RUNGS_ERR_PANIC. Nothing is written on error.
#[no_mangle]
pub unsafe extern "C" fn rungs_report_payload_encode(
    report: *const rungs_report,
    basic_layout: rungs_report_layout,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> rungs_result {
    call("rungs_report_payload_encode", || {
        let basic = basic_report_layout(basic_layout)?;
        let (report, sections) = unsafe { read_report(report, "report") }?;
        let layout = sections.layout(basic);
        unsafe {
            encode_into(buf, cap, out_len, layout.payload_len(), |out| {
                layout.encode(&report, out)
            })
        }
    })
}

/// Decode a NETWORK_REPORT payload of `len` bytes into `*out`; its length
/// says its layout (6 compact, 9 extended, 22 detailed, 32 needs), and
/// `*out` gets the sections that layout carries (`has_detail`,
/// `has_needs`). Set `out->struct_size` first (`rungs_report_init`): only
/// that many bytes are written, and a section the struct cannot hold whole
/// is left out (its flag 0).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if out is NULL, or bytes is NULL
/// with len above 0; RUNGS_ERR_INVALID_ARGUMENT if out->struct_size is
/// smaller than the basic fields; RUNGS_ERR_MALFORMED if len is no layout's
/// length, the version byte is not the layout's, or the fields break a rule
/// of `rungs_report_detail` or `rungs_look_ahead_needs` (docs/payloads.md);
/// RUNGS_ERR_PANIC. Nothing is written unless it succeeds.
#[no_mangle]
pub unsafe extern "C" fn rungs_report_payload_decode(
    bytes: *const u8,
    len: usize,
    out: *mut rungs_report,
) -> rungs_result {
    call("rungs_report_payload_decode", || unsafe {
        check_room(out, "out", Sections::default())?;
        let layout = layout_of_length(len)?;
        let report = decode_view(bytes, len, layout.payload_len(), |bytes| {
            layout.decode(bytes)
        })?;
        write_report(out, "out", &report, Sections::of_layout(layout))
    })
}

/// The NETWORK_REPORT layout whose payloads are `len` bytes long: every
/// layout has its own length, so the bytes need no layout beside them.
fn layout_of_length(len: usize) -> Result<ReportLayout> {
    [
        ReportLayout::Compact,
        ReportLayout::Extended,
        ReportLayout::Detailed,
        ReportLayout::Needs,
    ]
    .into_iter()
    .find(|layout| layout.payload_len() == len)
    .ok_or_else(|| {
        Error::malformed(
            "NETWORK_REPORT",
            DecodeError::Invalid("NETWORK_REPORT of no layout's length"),
        )
        .detailed(format!(
            "len is {len}; expected 6, 9, 22 or 32 (the compact, extended, detailed or \
             needs NETWORK_REPORT layout)"
        ))
        .into()
    })
}

unsafe fn encode_timing(
    event: *const rungs_timing_event,
    layout: TimingLayout,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> Result<()> {
    let event = TimingEvent::try_from(unsafe { read_in(event, "event") }?)?;
    unsafe {
        encode_into(buf, cap, out_len, layout.payload_len(), |out| {
            layout.encode(&event, out)
        })
    }
}

/// The layout of a game's basic reports (those without sections):
/// compact or extended.
fn basic_report_layout(layout: u8) -> Result<ReportLayout> {
    match layout {
        RUNGS_REPORT_LAYOUT_COMPACT => Ok(ReportLayout::Compact),
        RUNGS_REPORT_LAYOUT_EXTENDED => Ok(ReportLayout::Extended),
        _ => Err(Error::invalid_value(
            "basic_layout",
            layout,
            "RUNGS_REPORT_LAYOUT_COMPACT (0) or RUNGS_REPORT_LAYOUT_EXTENDED (1) (a report's \
             detail and needs sections choose the detailed and needs layouts themselves)",
        )
        .into()),
    }
}

/// A session's layout: any of the four.
pub(crate) fn session_report_layout(layout: u8) -> Option<ReportLayout> {
    match layout {
        RUNGS_REPORT_LAYOUT_DETAILED => Some(ReportLayout::Detailed),
        RUNGS_REPORT_LAYOUT_NEEDS => Some(ReportLayout::Needs),
        other => basic_report_layout(other).ok(),
    }
}

/// Run `encode` on the caller's buffer and set `*out_len` to what it wrote.
///
/// Only the first `min(cap, payload_len)` bytes are viewed: the encoder never
/// writes more, and a wild `cap` (say `SIZE_MAX`) then cannot make an invalid
/// slice. A shorter view still makes the encoder report `BufferTooSmall`,
/// before it writes anything.
///
/// # Safety
/// `buf` is NULL or valid for writes of `cap` bytes; `out_len` is NULL or
/// valid for writes.
unsafe fn encode_into(
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
    payload_len: usize,
    encode: impl FnOnce(&mut [u8]) -> crate::error::Result<usize>,
) -> Result<()> {
    require(out_len, "out_len")?;
    // SAFETY: NULL (with cap 0) or at least this many bytes are writable by contract.
    let view = unsafe { slice_out(buf, cap.min(payload_len), "buf") }?;
    let len = encode(view).map_err(|e| match e {
        Error::BufferTooSmall { needed } => {
            e.detailed(format!("cap is {cap}; expected at least {needed}"))
        }
        other => other,
    })?;
    // SAFETY: non-NULL (checked), valid for writes by contract.
    unsafe { write_out(out_len, len) };
    Ok(())
}

/// Run `decode` on the caller's bytes and write the result, as its C type,
/// through `out` (only on success).
///
/// # Safety
/// `bytes` is NULL or valid for reads of `len` bytes; `out` is NULL or valid
/// for writes.
unsafe fn decode_from<T, C: From<T>>(
    bytes: *const u8,
    len: usize,
    out: *mut C,
    payload_len: usize,
    decode: impl FnOnce(&[u8]) -> crate::error::Result<T>,
) -> Result<()> {
    require(out, "out")?;
    // SAFETY: forwarded contract.
    let value = unsafe { decode_view(bytes, len, payload_len, decode) }?;
    // SAFETY: non-NULL (checked), valid for writes by contract.
    unsafe { write_out(out, C::from(value)) };
    Ok(())
}

/// Run `decode` on the caller's `len` bytes; a wrong length's message says
/// what was got and what was expected.
///
/// # Safety
/// `bytes` is NULL or valid for reads of `len` bytes.
///
/// No payload is longer than an event's data union, so a `len` beyond it is
/// viewed as one byte past the union: still the wrong length for every
/// decoder (`Malformed`), and a wild `len` cannot make an invalid slice.
unsafe fn decode_view<T>(
    bytes: *const u8,
    len: usize,
    payload_len: usize,
    decode: impl FnOnce(&[u8]) -> crate::error::Result<T>,
) -> Result<T> {
    // SAFETY: NULL (with len 0) or at least this many bytes are readable by contract.
    let view = unsafe { slice_in(bytes, len.min(wire::TS_EVENT_DATA_LEN + 1), "bytes") }?;
    Ok(decode(view).map_err(|e| match e {
        Error::Malformed(_) if len != payload_len => e.detailed(format!(
            "len is {len}; expected {payload_len}, the payload's length"
        )),
        other => other,
    })?)
}
