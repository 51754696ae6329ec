//! The timing ladder (S2) and what the player sees (S6), as pure C functions.

use super::guard::{catch, require, write_out};
use super::result::rungs_result;
use super::types::{read_in, rungs_timing};
use crate::error::Error;
use crate::timing::{self, Tier, Timing};

/// Tier "Fast" (rungs 1–2), S6.
pub const RUNGS_TIER_FAST: u8 = 0;
/// Tier "Normal" (rungs 3–5).
pub const RUNGS_TIER_NORMAL: u8 = 1;
/// Tier "Poor" (rungs 6–8).
pub const RUNGS_TIER_POOR: u8 = 2;
/// Tier "Bad" (rungs 9–10, or a look-ahead longer than the rung's).
pub const RUNGS_TIER_BAD: u8 = 3;

/// Room a label needs, terminator included (`Normal (rung 10)` + NUL).
pub const RUNGS_LABEL_CAPACITY: usize = 17;

/// The timing of `rung` (1–10): `N/3N`, rung 1 is `1/4` (S2).
#[no_mangle]
pub unsafe extern "C" fn rungs_rung_timing(rung: u8, out: *mut rungs_timing) -> rungs_result {
    catch(|| {
        require(out, "out")?;
        let timing = Timing::of_rung(rung)?;
        // SAFETY: checked non-NULL; caller provides writable storage.
        unsafe { write_out(out, timing.into()) };
        Ok(())
    })
}

fn check_fps(fps: u8) -> crate::Result<()> {
    if fps == 0 {
        Err(Error::InvalidArgument("fps must be 1..=255"))
    } else {
        Ok(())
    }
}

/// Half a round trip in frames, rounded up: `ceil(rtt_ms * fps / 2000)` (S2).
#[no_mangle]
pub unsafe extern "C" fn rungs_one_way_frames(rtt_ms: u32, fps: u8, out: *mut u32) -> rungs_result {
    catch(|| {
        require(out, "out")?;
        check_fps(fps)?;
        // SAFETY: checked non-NULL.
        unsafe { write_out(out, timing::one_way_frames(rtt_ms, fps)) };
        Ok(())
    })
}

/// The same with a quarter of headroom: `ceil(rtt_ms * 5 * fps / 8000)` (S2).
#[no_mangle]
pub unsafe extern "C" fn rungs_one_way_frames_headroom(
    rtt_ms: u32,
    fps: u8,
    out: *mut u32,
) -> rungs_result {
    catch(|| {
        require(out, "out")?;
        check_fps(fps)?;
        // SAFETY: checked non-NULL.
        unsafe { write_out(out, timing::one_way_frames_headroom(rtt_ms, fps)) };
        Ok(())
    })
}

/// The lowest timing whose look-ahead covers `owt` one-way frames plus one
/// send period (S2): `1/4`, `N/3N`, or `10/L` up to `10/250`.
#[no_mangle]
pub unsafe extern "C" fn rungs_required_timing(owt: u32, out: *mut rungs_timing) -> rungs_result {
    catch(|| {
        require(out, "out")?;
        // SAFETY: checked non-NULL.
        unsafe { write_out(out, timing::required(owt).into()) };
        Ok(())
    })
}

/// `RUNGS_OK` when `timing` satisfies S1, else `RUNGS_ERR_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_validate(timing: *const rungs_timing) -> rungs_result {
    catch(|| {
        // SAFETY: read_in checks NULL; the caller passes a readable struct.
        Timing::try_from(unsafe { read_in(timing, "timing")? }).map(|_| ())
    })
}

/// Compare two timings (S1 order): `*out` is -1, 0 or 1 as `a` is less
/// than, equal to or greater than `b` ("needs a higher rung, or a longer
/// look-ahead on the same rung" is greater).
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_compare(
    a: *const rungs_timing,
    b: *const rungs_timing,
    out: *mut i32,
) -> rungs_result {
    catch(|| {
        require(out, "out")?;
        // SAFETY: read_in checks NULL.
        let a = Timing::try_from(unsafe { read_in(a, "a")? })?;
        // SAFETY: read_in checks NULL.
        let b = Timing::try_from(unsafe { read_in(b, "b")? })?;
        // SAFETY: checked non-NULL.
        unsafe { write_out(out, a.cmp(&b) as i32) };
        Ok(())
    })
}

/// The tier a player is shown for `timing` (S6): one of `RUNGS_TIER_*`.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_tier(
    timing: *const rungs_timing,
    out_tier: *mut u8,
) -> rungs_result {
    catch(|| {
        require(out_tier, "out_tier")?;
        // SAFETY: read_in checks NULL.
        let timing = Timing::try_from(unsafe { read_in(timing, "timing")? })?;
        // SAFETY: checked non-NULL.
        unsafe { write_out(out_tier, timing.tier() as u8) };
        Ok(())
    })
}

/// The disabled Connection slider's position for `timing`: `11 - rung` on a
/// 1–10 scale, so rung 1 sits at the right end (S6).
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_slider_position(
    timing: *const rungs_timing,
    out: *mut u8,
) -> rungs_result {
    catch(|| {
        require(out, "out")?;
        // SAFETY: read_in checks NULL.
        let timing = Timing::try_from(unsafe { read_in(timing, "timing")? })?;
        // SAFETY: checked non-NULL.
        unsafe { write_out(out, timing.slider_position()) };
        Ok(())
    })
}

/// The slider label for `timing`, e.g. `Fast (rung 2)` (S6), copied with a
/// terminator into `buf` of `cap` bytes (`RUNGS_LABEL_CAPACITY` always fits).
/// `*out_len` (may be NULL) receives the length without the terminator. A
/// buffer too small gets `RUNGS_ERR_BUFFER_TOO_SMALL` and is left untouched.
#[no_mangle]
pub unsafe extern "C" fn rungs_timing_label(
    timing: *const rungs_timing,
    buf: *mut libc::c_char,
    cap: usize,
    out_len: *mut usize,
) -> rungs_result {
    catch(|| {
        require(buf, "buf")?;
        // SAFETY: read_in checks NULL.
        let timing = Timing::try_from(unsafe { read_in(timing, "timing")? })?;
        let label = timing.label();
        // SAFETY: buf is writable for cap bytes (caller contract), checked non-NULL.
        unsafe { copy_c_string(label.as_str(), buf, cap, out_len) }
    })
}

/// The name of a tier (`"Fast"`, `"Normal"`, `"Poor"`, `"Bad"`) as a static
/// string through `*out`; `RUNGS_ERR_INVALID_ARGUMENT` for another value.
#[no_mangle]
pub unsafe extern "C" fn rungs_tier_name(tier: u8, out: *mut *const libc::c_char) -> rungs_result {
    catch(|| {
        require(out, "out")?;
        let tier = Tier::from_u8(tier).ok_or(Error::InvalidArgument("tier must be 0..=3"))?;
        let name: &'static [u8] = match tier {
            Tier::Fast => b"Fast\0",
            Tier::Normal => b"Normal\0",
            Tier::Poor => b"Poor\0",
            Tier::Bad => b"Bad\0",
        };
        // SAFETY: checked non-NULL.
        unsafe { write_out(out, name.as_ptr().cast()) };
        Ok(())
    })
}

/// Copy `text` and a terminator into `buf` of `cap` bytes, or refuse with
/// `BufferTooSmall` writing nothing.
///
/// # Safety
/// `buf` is valid for `cap` bytes; `out_len` is NULL or writable.
pub(crate) unsafe fn copy_c_string(
    text: &str,
    buf: *mut libc::c_char,
    cap: usize,
    out_len: *mut usize,
) -> crate::Result<()> {
    if !out_len.is_null() {
        // SAFETY: non-NULL, writable by contract.
        unsafe { *out_len = text.len() };
    }
    if cap < text.len() + 1 {
        return Err(Error::BufferTooSmall {
            needed: text.len() + 1,
        });
    }
    // SAFETY: cap >= len + 1 bytes are writable.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
        *buf.add(text.len()) = 0;
    }
    Ok(())
}
