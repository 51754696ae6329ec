//! C API of the event payload codecs (S7): TIMING and NETWORK_REPORT bytes
//! for the engine's own event queue. Layouts: `docs/payloads.md`.
//!
//! Encoders write into a caller buffer and set `*out_len`; a buffer smaller
//! than the payload gets `RUNGS_ERR_BUFFER_TOO_SMALL` and nothing is written
//! (the `RUNGS_*_PAYLOAD_LEN` constants say how much to provide). Decoders
//! take exactly the payload's bytes; anything else is `RUNGS_ERR_MALFORMED`.

use super::guard::{catch, require, write_out};
use super::result::rungs_result;
use super::types::{read_in, rungs_report, rungs_timing_event};
use crate::error::{Error, Result};
use crate::report::Report;
use crate::timing::TimingEvent;
use crate::wire::events::{self, ReportLayout, TimingLayout};

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
pub const RUNGS_REPORT_LAYOUT_COMPACT: u8 = 0;
/// NETWORK_REPORT layout: 9 bytes, version 1, process time in µs.
pub const RUNGS_REPORT_LAYOUT_EXTENDED: u8 = 1;

// The C constants are literals (cbindgen copies them into the header); they
// must agree with the codecs.
const _: () = assert!(RUNGS_TIMING_PAYLOAD_LEN == events::TIMING_LEN);
const _: () = assert!(RUNGS_RA_TIMING_PAYLOAD_LEN == events::RA_TIMING_LEN);
const _: () = assert!(RUNGS_REPORT_PAYLOAD_LEN == events::REPORT_LEN);
const _: () = assert!(RUNGS_REPORT_EXTENDED_PAYLOAD_LEN == events::REPORT_EXTENDED_LEN);
const _: () = assert!(RUNGS_TS_FOG_BIAS == events::TS_FOG_BIAS);

/// Encode `*event` as a Tiberian Sun TIMING payload (5 bytes) into `buf` of
/// `cap` bytes; `*out_len` receives the length written. `fog_bias` is added
/// to MaxAhead: `RUNGS_TS_FOG_BIAS` for an engine keeping vanilla TS's fog
/// quirk while fog is on, else 0.
///
/// Errors: `RUNGS_ERR_NULL_POINTER` (event, buf, out_len),
/// `RUNGS_ERR_INVALID_ARGUMENT` (the event breaks S1 or has frame rate 0),
/// `RUNGS_ERR_BUFFER_TOO_SMALL` (cap < 5; nothing written).
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_payload_encode(
    event: *const rungs_timing_event,
    fog_bias: u8,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> rungs_result {
    catch(|| unsafe {
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
/// Errors: `RUNGS_ERR_NULL_POINTER` (bytes, out), `RUNGS_ERR_MALFORMED`
/// (length other than 5, frame rate 0 or above 255, MaxAhead below the bias,
/// a timing that breaks S1). `*out` is written only on success.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_payload_decode(
    bytes: *const u8,
    len: usize,
    fog_bias: u8,
    out: *mut rungs_timing_event,
) -> rungs_result {
    let layout = TimingLayout::TiberianSun { fog_bias };
    catch(|| unsafe { decode_from(bytes, len, out, |bytes| layout.decode(bytes)) })
}

/// Encode `*event` as a Red Alert TIMING payload (4 bytes, no
/// FrameSendRate) into `buf` of `cap` bytes; `*out_len` receives the length.
/// `send_period` is the session's fixed send period (1–10); the event's send
/// period must equal it, since the bytes cannot carry another one.
///
/// Errors: `RUNGS_ERR_NULL_POINTER` (event, buf, out_len),
/// `RUNGS_ERR_INVALID_ARGUMENT` (event breaks S1, frame rate 0, send period
/// outside 1–10 or different from the event's), `RUNGS_ERR_BUFFER_TOO_SMALL`
/// (cap < 4; nothing written).
#[no_mangle]
pub unsafe extern "C" fn rungs_ra_timing_payload_encode(
    event: *const rungs_timing_event,
    send_period: u8,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> rungs_result {
    catch(|| unsafe {
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
/// Errors: `RUNGS_ERR_NULL_POINTER` (bytes, out), `RUNGS_ERR_INVALID_ARGUMENT`
/// (send period outside 1–10), `RUNGS_ERR_MALFORMED` (length other than 4,
/// frame rate 0 or above 255, MaxAhead that breaks S1 with that send period).
#[no_mangle]
pub unsafe extern "C" fn rungs_ra_timing_payload_decode(
    bytes: *const u8,
    len: usize,
    send_period: u8,
    out: *mut rungs_timing_event,
) -> rungs_result {
    let layout = TimingLayout::RedAlert { send_period };
    catch(|| unsafe { decode_from(bytes, len, out, |bytes| layout.decode(bytes)) })
}

/// Encode `*report` as a NETWORK_REPORT payload in `layout`
/// (`RUNGS_REPORT_LAYOUT_COMPACT`, 6 bytes, or `RUNGS_REPORT_LAYOUT_EXTENDED`,
/// 9 bytes) into `buf` of `cap` bytes; `*out_len` receives the length.
/// Large values saturate; the compact layout rounds the process time up to
/// whole ms.
///
/// Errors: `RUNGS_ERR_NULL_POINTER` (report, buf, out_len),
/// `RUNGS_ERR_INVALID_ARGUMENT` (unknown layout, `has_worst_rtt` not 0/1),
/// `RUNGS_ERR_BUFFER_TOO_SMALL` (nothing written).
#[no_mangle]
pub unsafe extern "C" fn rungs_report_payload_encode(
    report: *const rungs_report,
    layout: u8,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> rungs_result {
    catch(|| {
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
/// Errors: `RUNGS_ERR_NULL_POINTER` (bytes, out), `RUNGS_ERR_INVALID_ARGUMENT`
/// (unknown layout), `RUNGS_ERR_MALFORMED` (wrong length, or an extended
/// payload whose version byte is not 1).
#[no_mangle]
pub unsafe extern "C" fn rungs_report_payload_decode(
    bytes: *const u8,
    len: usize,
    layout: u8,
    out: *mut rungs_report,
) -> rungs_result {
    catch(|| {
        let layout = report_layout(layout)?;
        unsafe { decode_from(bytes, len, out, |bytes| layout.decode(bytes)) }
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

pub(crate) fn report_layout(layout: u8) -> Result<ReportLayout> {
    match layout {
        RUNGS_REPORT_LAYOUT_COMPACT => Ok(ReportLayout::Compact),
        RUNGS_REPORT_LAYOUT_EXTENDED => Ok(ReportLayout::Extended),
        _ => Err(Error::InvalidArgument(
            "report layout must be RUNGS_REPORT_LAYOUT_COMPACT or _EXTENDED",
        )),
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
    encode: impl FnOnce(&mut [u8]) -> Result<usize>,
) -> Result<()> {
    require(out_len, "out_len")?;
    require(buf, "buf")?;
    // SAFETY: non-NULL, and at least this many bytes are writable by contract.
    let view = unsafe { std::slice::from_raw_parts_mut(buf, cap.min(payload_len)) };
    let len = encode(view)?;
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
    decode: impl FnOnce(&[u8]) -> Result<T>,
) -> Result<()> {
    require(out, "out")?;
    let value = decode(unsafe { input_bytes(bytes, len) }?)?;
    // SAFETY: non-NULL (checked), valid for writes by contract.
    unsafe { write_out(out, C::from(value)) };
    Ok(())
}

/// The caller's payload bytes as a slice.
///
/// No payload is longer than an event's data union, so a `len` beyond it is
/// viewed as one byte past the union: still the wrong length for every
/// decoder (`Malformed`), and a wild `len` cannot make an invalid slice.
///
/// # Safety
/// `bytes` is NULL or valid for reads of `len` bytes.
unsafe fn input_bytes<'a>(bytes: *const u8, len: usize) -> Result<&'a [u8]> {
    require(bytes, "bytes")?;
    // SAFETY: non-NULL, and at least this many bytes are readable by contract.
    Ok(unsafe { std::slice::from_raw_parts(bytes, len.min(events::TS_EVENT_DATA_LEN + 1)) })
}
