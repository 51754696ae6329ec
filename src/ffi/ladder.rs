//! The timing ladder (S2) and what the player sees (S6), as pure C functions.

use super::args::{in_range, slice_out, write_optional, write_to};
use super::guard::call;
use super::result::rungs_result;
use super::types::{read_timing, rungs_tier, rungs_timing};
use crate::error::Error;
use crate::timing::{self, Tier, Timing};

/// Tier "Fast" (rungs 1–2), S6.
pub const RUNGS_TIER_FAST: rungs_tier = 0;
/// Tier "Normal" (rungs 3–5).
pub const RUNGS_TIER_NORMAL: rungs_tier = 1;
/// Tier "Poor" (rungs 6–8).
pub const RUNGS_TIER_POOR: rungs_tier = 2;
/// Tier "Bad" (rungs 9–10, or a look-ahead longer than the rung's).
pub const RUNGS_TIER_BAD: rungs_tier = 3;

/// Room a label needs, terminator included (`Normal (rung 10)` + NUL).
pub const RUNGS_LABEL_CAPACITY: usize = 17;

/// The timing of `rung` (1–10): `N/3N`, rung 1 is `1/4` (S2).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if out is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if rung is not 1 to 10; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_rung_timing(rung: u8, out: *mut rungs_timing) -> rungs_result {
    call("rungs_rung_timing", || {
        let timing = Timing::of_rung(in_range(rung, 1, 10, "rung")?)?;
        // SAFETY: NULL (refused) or writable, by contract.
        unsafe { write_to(out, "out", timing.into()) }
    })
}

/// Half a round trip in frames, rounded up: `ceil(rtt_ms * fps / 2000)` (S2).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if out is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if fps is 0; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_one_way_frames(rtt_ms: u32, fps: u8, out: *mut u32) -> rungs_result {
    call("rungs_one_way_frames", || {
        in_range(fps, 1, 255, "fps")?;
        // SAFETY: NULL (refused) or writable, by contract.
        unsafe { write_to(out, "out", timing::one_way_frames(rtt_ms, fps)) }
    })
}

/// The same with a quarter of headroom: `ceil(rtt_ms * 5 * fps / 8000)` (S2).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if out is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if fps is 0; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_one_way_frames_headroom(
    rtt_ms: u32,
    fps: u8,
    out: *mut u32,
) -> rungs_result {
    call("rungs_one_way_frames_headroom", || {
        in_range(fps, 1, 255, "fps")?;
        // SAFETY: NULL (refused) or writable, by contract.
        unsafe { write_to(out, "out", timing::one_way_frames_headroom(rtt_ms, fps)) }
    })
}

/// The lowest timing whose look-ahead covers `owt` one-way frames plus one
/// send period (S2): `1/4`, `N/3N`, or `10/L` up to `10/250`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if out is NULL; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_required_timing(owt: u32, out: *mut rungs_timing) -> rungs_result {
    call("rungs_required_timing", || {
        // SAFETY: NULL (refused) or writable, by contract.
        unsafe { write_to(out, "out", timing::required(owt).into()) }
    })
}

/// Check `timing` against S1: send_period 1 to 10, look_ahead a multiple of
/// it from send_period to 250.
///
/// Returns: RUNGS_OK if timing satisfies S1; RUNGS_ERR_NULL_POINTER if timing
/// is NULL; RUNGS_ERR_INVALID_ARGUMENT if it breaks S1; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_validate(timing: *const rungs_timing) -> rungs_result {
    call("rungs_timing_validate", || {
        // SAFETY: read_timing checks NULL; the caller passes a readable struct.
        unsafe { read_timing(timing, "timing") }.map(|_| ())
    })
}

/// Compare two timings (S1 order): `*out` is -1, 0 or 1 as `a` is less
/// than, equal to or greater than `b` ("needs a higher rung, or a longer
/// look-ahead on the same rung" is greater).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if a, b or out is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if a or b breaks S1; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_compare(
    a: *const rungs_timing,
    b: *const rungs_timing,
    out: *mut i32,
) -> rungs_result {
    call("rungs_timing_compare", || {
        // SAFETY: read_timing and write_to check NULL; the rest is by contract.
        unsafe {
            let (a, b) = (read_timing(a, "a")?, read_timing(b, "b")?);
            write_to(out, "out", a.cmp(&b) as i32)
        }
    })
}

/// The tier a player is shown for `timing` (S6): one of `RUNGS_TIER_*`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if timing or out_tier is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if timing breaks S1; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_tier(
    timing: *const rungs_timing,
    out_tier: *mut rungs_tier,
) -> rungs_result {
    call("rungs_timing_tier", || {
        // SAFETY: read_timing and write_to check NULL; the rest is by contract.
        unsafe {
            write_to(
                out_tier,
                "out_tier",
                read_timing(timing, "timing")?.tier() as u8,
            )
        }
    })
}

/// The disabled Connection slider's position for `timing`: `11 - rung` on a
/// 1–10 scale, so rung 1 sits at the right end (S6).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if timing or out is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if timing breaks S1; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_slider_position(
    timing: *const rungs_timing,
    out: *mut u8,
) -> rungs_result {
    call("rungs_timing_slider_position", || {
        // SAFETY: read_timing and write_to check NULL; the rest is by contract.
        unsafe { write_to(out, "out", read_timing(timing, "timing")?.slider_position()) }
    })
}

/// The slider label for `timing`, e.g. `Fast (rung 2)` (S6), copied with a
/// terminator into `buf` of `cap` bytes (`RUNGS_LABEL_CAPACITY` always fits).
/// `*out_len` (may be NULL) receives the length without the terminator.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if timing is NULL, or buf is
/// NULL with cap above 0; RUNGS_ERR_INVALID_ARGUMENT if timing breaks S1;
/// RUNGS_ERR_BUFFER_TOO_SMALL if cap is below the label's length plus 1
/// (buf untouched, `*out_len` still set); RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_label(
    timing: *const rungs_timing,
    buf: *mut libc::c_char,
    cap: usize,
    out_len: *mut usize,
) -> rungs_result {
    call("rungs_timing_label", || {
        // SAFETY: read_timing checks NULL.
        let timing = unsafe { read_timing(timing, "timing") }?;
        let label = timing.label();
        // SAFETY: buf is NULL or writable for cap bytes (caller contract).
        unsafe { copy_c_string(label.as_str(), buf, cap, out_len) }
    })
}

/// The name of a tier (`"Fast"`, `"Normal"`, `"Poor"`, `"Bad"`) as a static
/// string through `*out`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if out is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if tier is not a `RUNGS_TIER_*`; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_tier_name(
    tier: rungs_tier,
    out: *mut *const libc::c_char,
) -> rungs_result {
    call("rungs_tier_name", || {
        let tier = Tier::from_u8(in_range(tier, RUNGS_TIER_FAST, RUNGS_TIER_BAD, "tier")?)
            .ok_or(Error::invalid_value("tier", tier, "a RUNGS_TIER_*"))?;
        let name: &'static [u8] = match tier {
            Tier::Fast => b"Fast\0",
            Tier::Normal => b"Normal\0",
            Tier::Poor => b"Poor\0",
            Tier::Bad => b"Bad\0",
        };
        // SAFETY: NULL (refused) or writable, by contract.
        unsafe { write_to(out, "out", name.as_ptr().cast()) }
    })
}

/// Copy `text` and a terminator into `buf` of `cap` bytes, or refuse with
/// `BufferTooSmall` writing nothing.
///
/// # Safety
/// `buf` is NULL or valid for `cap` bytes; `out_len` is NULL or writable.
pub(crate) unsafe fn copy_c_string(
    text: &str,
    buf: *mut libc::c_char,
    cap: usize,
    out_len: *mut usize,
) -> super::result::Result<()> {
    // SAFETY: NULL or writable, by contract.
    unsafe { write_optional(out_len, text.len()) };
    let needed = text.len() + 1;
    // SAFETY: NULL (with cap 0) or `cap` writable bytes, by contract.
    let buf = unsafe { slice_out(buf.cast::<u8>(), cap, "buf") }?;
    let Some(buf) = buf.get_mut(..needed) else {
        return Err(Error::BufferTooSmall { needed }
            .detailed(format!("cap is {cap}; expected at least {needed}"))
            .into());
    };
    buf[..text.len()].copy_from_slice(text.as_bytes());
    buf[text.len()] = 0;
    Ok(())
}
