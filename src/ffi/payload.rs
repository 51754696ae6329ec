//! C API of the event payload codecs (S7): TIMING and NETWORK_REPORT bytes
//! for the engine's own event queue. Layouts: `docs/payloads.md`.
//!
//! Encoders write into a caller buffer and set `*out_len`; a buffer smaller
//! than the payload gets `RUNGS_ERR_BUFFER_TOO_SMALL` and nothing is written
//! (the `RUNGS_*_PAYLOAD_LEN` constants say how much to provide). Decoders
//! take exactly the payload's bytes; anything else is `RUNGS_ERR_MALFORMED`.
//! Buffers follow the C API's rule: NULL is accepted with a length of 0.

use super::args::{in_range, read_in, read_optional, require, slice_in, slice_out, write_out};
use super::guard::call;
use super::result::rungs_result;
use super::result::Result;
use super::types::{
    report_with_needs, rungs_look_ahead_needs, rungs_report, rungs_report_detail,
    rungs_timing_event, write_report_with_detail,
};
use crate::error::Error;
use crate::report::Report;
use crate::timing::TimingEvent;
use crate::wire::events::{self, ReportLayout, TimingLayout};

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
/// round-trip distribution and the stalls by seat (docs/payloads.md), what
/// the tracking policy reads. A `rungs_session` with it in
/// `rungs_session_config.report_layout` measures, encodes and decodes it
/// itself; an engine with its own event queue encodes and decodes it with
/// `rungs_report_payload_encode_detailed` / `_decode_detailed`, which take
/// the detail (`rungs_report_detail`) beside the `rungs_report`.
/// `rungs_report_payload_encode` / `_decode` refuse it: `rungs_report` has
/// no fields for the detail.
pub const RUNGS_REPORT_LAYOUT_DETAILED: rungs_report_layout = 2;
/// Bytes of a NETWORK_REPORT payload in the detailed layout.
pub const RUNGS_REPORT_DETAILED_PAYLOAD_LEN: usize = 22;
/// NETWORK_REPORT layout: 32 bytes, version 3, the detailed layout's fields
/// plus how much look-ahead the interval's frames needed
/// (`rungs_look_ahead_needs`, docs/payloads.md), what the tracking policy
/// sheds its margin and checks its decreases by. A `rungs_session` with it
/// in `rungs_session_config.report_layout` encodes and decodes it itself
/// (the engine passes each frame's need with `rungs_session_add_frame_need`);
/// an engine with its own event queue uses
/// `rungs_report_payload_encode_needs` / `_decode_needs`. The lockstep
/// session's turns carry their reports in it.
pub const RUNGS_REPORT_LAYOUT_NEEDS: rungs_report_layout = 3;
/// Bytes of a NETWORK_REPORT payload in the needs layout.
pub const RUNGS_REPORT_NEEDS_PAYLOAD_LEN: usize = 32;

// The C constants are literals (cbindgen copies them into the header); they
// must agree with the codecs.
const _: () = assert!(RUNGS_TIMING_PAYLOAD_LEN == events::TIMING_LEN);
const _: () = assert!(RUNGS_RA_TIMING_PAYLOAD_LEN == events::RA_TIMING_LEN);
const _: () = assert!(RUNGS_REPORT_PAYLOAD_LEN == events::REPORT_LEN);
const _: () = assert!(RUNGS_REPORT_EXTENDED_PAYLOAD_LEN == events::REPORT_EXTENDED_LEN);
const _: () = assert!(RUNGS_REPORT_DETAILED_PAYLOAD_LEN == events::REPORT_DETAILED_LEN);
const _: () = assert!(RUNGS_REPORT_NEEDS_PAYLOAD_LEN == events::REPORT_NEEDS_LEN);
const _: () = assert!(RUNGS_TS_FOG_BIAS == events::TS_FOG_BIAS);

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

/// Encode `*report` as a NETWORK_REPORT payload in `layout`
/// (`RUNGS_REPORT_LAYOUT_COMPACT`, 6 bytes, or `RUNGS_REPORT_LAYOUT_EXTENDED`,
/// 9 bytes) into `buf` of `cap` bytes; `*out_len` receives the length.
/// Large values saturate; the compact layout rounds the process time up to
/// whole ms.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if report or out_len is NULL,
/// or buf is NULL with cap above 0; RUNGS_ERR_INVALID_ARGUMENT if layout is
/// not a `RUNGS_REPORT_LAYOUT_*` or report->has_worst_rtt is neither 0 nor 1;
/// RUNGS_ERR_BUFFER_TOO_SMALL if cap is below the layout's length (nothing
/// written); RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_report_payload_encode(
    report: *const rungs_report,
    layout: rungs_report_layout,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> rungs_result {
    call("rungs_report_payload_encode", || {
        let layout = report_layout(layout)?;
        let report = Report::try_from(unsafe { read_in(report, "report") }?)?;
        unsafe {
            encode_into(buf, cap, out_len, layout.payload_len(), |out| {
                layout.encode(&report, out)
            })
        }
    })
}

/// Decode a NETWORK_REPORT payload of `len` bytes in `layout` into `*out`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if out is NULL, or bytes is NULL
/// with len above 0; RUNGS_ERR_INVALID_ARGUMENT if layout is not a
/// `RUNGS_REPORT_LAYOUT_*`; RUNGS_ERR_MALFORMED if len is not the layout's
/// length, or an extended payload's version byte is not 1; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_report_payload_decode(
    bytes: *const u8,
    len: usize,
    layout: rungs_report_layout,
    out: *mut rungs_report,
) -> rungs_result {
    call("rungs_report_payload_decode", || {
        let layout = report_layout(layout)?;
        unsafe {
            decode_from(bytes, len, out, layout.payload_len(), |bytes| {
                layout.decode(bytes)
            })
        }
    })
}

/// Encode `*report` with its `*detail` as a NETWORK_REPORT payload in the
/// detailed layout (`RUNGS_REPORT_LAYOUT_DETAILED`, 22 bytes) into `buf` of
/// `cap` bytes; `*out_len` receives the length. Large values saturate (the
/// frames before the stalled frames, so those stay within them).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if report, detail or out_len is
/// NULL, or buf is NULL with cap above 0; RUNGS_ERR_INVALID_ARGUMENT if a
/// has_ flag is neither 0 nor 1, detail->waited_for is neither 0–15 nor
/// `RUNGS_NO_SEAT`, or the pair breaks a rule of `rungs_report_detail`;
/// RUNGS_ERR_BUFFER_TOO_SMALL if cap is below 22; RUNGS_ERR_PANIC. Nothing is
/// written on error.
#[no_mangle]
pub unsafe extern "C" fn rungs_report_payload_encode_detailed(
    report: *const rungs_report,
    detail: *const rungs_report_detail,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> rungs_result {
    call("rungs_report_payload_encode_detailed", || unsafe {
        encode_with_detail(
            report,
            detail,
            None,
            ReportLayout::Detailed,
            buf,
            cap,
            out_len,
        )
    })
}

/// Decode a NETWORK_REPORT payload of `len` bytes in the detailed layout
/// (`RUNGS_REPORT_LAYOUT_DETAILED`) into `*out` and its detail into
/// `*out_detail`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if out or out_detail is NULL, or
/// bytes is NULL with len above 0; RUNGS_ERR_MALFORMED if len is not 22, the
/// version byte is not 2, or the fields break a rule of
/// `rungs_report_detail` (docs/payloads.md); RUNGS_ERR_PANIC. `*out` and
/// `*out_detail` are written only on success.
#[no_mangle]
pub unsafe extern "C" fn rungs_report_payload_decode_detailed(
    bytes: *const u8,
    len: usize,
    out: *mut rungs_report,
    out_detail: *mut rungs_report_detail,
) -> rungs_result {
    call("rungs_report_payload_decode_detailed", || unsafe {
        decode_with_detail(bytes, len, ReportLayout::Detailed, out, out_detail, None)
    })
}

/// Encode `*report` with its `*detail` and the interval's `*needs` as a
/// NETWORK_REPORT payload in the needs layout (`RUNGS_REPORT_LAYOUT_NEEDS`,
/// 32 bytes) into `buf` of `cap` bytes; `*out_len` receives the length.
/// `needs` may be NULL (or have reference 0): the payload then says no
/// needs were measured. Large values saturate as in the detailed layout.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if report, detail or out_len is
/// NULL, or buf is NULL with cap above 0; RUNGS_ERR_INVALID_ARGUMENT if the
/// report and detail break a rule of `rungs_report_detail` or the needs one
/// of `rungs_look_ahead_needs` (the message names the fields);
/// RUNGS_ERR_BUFFER_TOO_SMALL if cap is below 32; RUNGS_ERR_PANIC. Nothing
/// is written on error.
#[no_mangle]
pub unsafe extern "C" fn rungs_report_payload_encode_needs(
    report: *const rungs_report,
    detail: *const rungs_report_detail,
    needs: *const rungs_look_ahead_needs,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> rungs_result {
    call("rungs_report_payload_encode_needs", || unsafe {
        let needs = read_optional(needs);
        encode_with_detail(
            report,
            detail,
            needs,
            ReportLayout::Needs,
            buf,
            cap,
            out_len,
        )
    })
}

/// Decode a NETWORK_REPORT payload of `len` bytes in the needs layout
/// (`RUNGS_REPORT_LAYOUT_NEEDS`) into `*out`, its detail into `*out_detail`
/// and its needs into `*out_needs` (reference 0 when it carries none).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if out, out_detail or
/// out_needs is NULL, or bytes is NULL with len above 0;
/// RUNGS_ERR_MALFORMED if len is not 32, the version byte is not 3, or the
/// fields break a rule of `rungs_report_detail` or
/// `rungs_look_ahead_needs` (docs/payloads.md); RUNGS_ERR_PANIC. Nothing is
/// written unless it succeeds.
#[no_mangle]
pub unsafe extern "C" fn rungs_report_payload_decode_needs(
    bytes: *const u8,
    len: usize,
    out: *mut rungs_report,
    out_detail: *mut rungs_report_detail,
    out_needs: *mut rungs_look_ahead_needs,
) -> rungs_result {
    call("rungs_report_payload_decode_needs", || unsafe {
        require(out_needs, "out_needs")?;
        decode_with_detail(
            bytes,
            len,
            ReportLayout::Needs,
            out,
            out_detail,
            Some(out_needs),
        )
    })
}

/// The detailed and needs encoders: the report and detail (and needs) from
/// C, checked by the layout's rules, encoded into the caller's buffer.
///
/// # Safety
/// The pointers follow the C API's contract ([`read_in`], [`encode_into`]).
unsafe fn encode_with_detail(
    report: *const rungs_report,
    detail: *const rungs_report_detail,
    needs: Option<rungs_look_ahead_needs>,
    layout: ReportLayout,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> Result<()> {
    let report = unsafe { read_in(report, "report") }?;
    let detail = unsafe { read_in(detail, "detail") }?;
    // Without needs (the detailed layout's call passes none) this is
    // `detailed_report`'s report.
    let report = report_with_needs(report, detail, needs)?;
    unsafe {
        encode_into(buf, cap, out_len, layout.payload_len(), |out| {
            layout.encode(&report, out)
        })
    }
}

/// The detailed and needs decoders: `len` bytes in `layout` into the
/// report, its detail and, when asked for (`out_needs`, checked non-NULL by
/// the caller), its needs; nothing written unless they decode.
///
/// # Safety
/// The pointers follow the C API's contract ([`decode_view`], [`write_out`]).
unsafe fn decode_with_detail(
    bytes: *const u8,
    len: usize,
    layout: ReportLayout,
    out: *mut rungs_report,
    out_detail: *mut rungs_report_detail,
    out_needs: Option<*mut rungs_look_ahead_needs>,
) -> Result<()> {
    require(out, "out")?;
    require(out_detail, "out_detail")?;
    let report = unsafe {
        decode_view(bytes, len, layout.payload_len(), |bytes| {
            layout.decode(bytes)
        })
    }?;
    unsafe { write_report_with_detail(report, out, out_detail, out_needs) };
    Ok(())
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

/// A payload call's layout: compact or extended (the detailed and needs
/// layouts have calls of their own, which take the detail beside the
/// report).
pub(crate) fn report_layout(layout: u8) -> Result<ReportLayout> {
    match layout {
        RUNGS_REPORT_LAYOUT_COMPACT => Ok(ReportLayout::Compact),
        RUNGS_REPORT_LAYOUT_EXTENDED => Ok(ReportLayout::Extended),
        RUNGS_REPORT_LAYOUT_DETAILED => Err(Error::InvalidValue(
            "layout is RUNGS_REPORT_LAYOUT_DETAILED (2), whose detail a rungs_report \
             cannot hold (use rungs_report_payload_encode_detailed / _decode_detailed); \
             expected RUNGS_REPORT_LAYOUT_COMPACT (0) or RUNGS_REPORT_LAYOUT_EXTENDED (1)"
                .to_string(),
        )
        .into()),
        RUNGS_REPORT_LAYOUT_NEEDS => Err(Error::InvalidValue(
            "layout is RUNGS_REPORT_LAYOUT_NEEDS (3), whose detail and needs a rungs_report \
             cannot hold (use rungs_report_payload_encode_needs / _decode_needs); \
             expected RUNGS_REPORT_LAYOUT_COMPACT (0) or RUNGS_REPORT_LAYOUT_EXTENDED (1)"
                .to_string(),
        )
        .into()),
        _ => Err(Error::InvalidValue(format!(
            "layout is {layout}; expected RUNGS_REPORT_LAYOUT_COMPACT (0) or \
             RUNGS_REPORT_LAYOUT_EXTENDED (1)"
        ))
        .into()),
    }
}

/// A session's layout: any of the four.
pub(crate) fn session_report_layout(layout: u8) -> Option<ReportLayout> {
    match layout {
        RUNGS_REPORT_LAYOUT_DETAILED => Some(ReportLayout::Detailed),
        RUNGS_REPORT_LAYOUT_NEEDS => Some(ReportLayout::Needs),
        other => report_layout(other).ok(),
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
    let view = unsafe { slice_in(bytes, len.min(events::TS_EVENT_DATA_LEN + 1), "bytes") }?;
    Ok(decode(view).map_err(|e| match e {
        Error::Malformed(_) if len != payload_len => e.detailed(format!(
            "len is {len}; expected {payload_len}, the payload's length"
        )),
        other => other,
    })?)
}
