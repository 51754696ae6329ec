//! A status another thread can read without entering the object.
//!
//! The guard (`guard.rs`) lets one call at a time inside an object, so a UI
//! thread that asked a session for its status used to make the game thread's
//! own frame calls fail with `RUNGS_ERR_BUSY` whenever the two met. Instead
//! every call on a session publishes a copy of its status on the way out,
//! and `rungs_session_status` / `rungs_lockstep_status` read that copy under
//! its own lock, never the guard: the reader waits at most for a copy of a
//! few dozen bytes, and the game thread is never refused. The copy is the
//! status as of the latest call on the handle that returned, which for the
//! game thread itself is the live status.

use std::sync::{Mutex, PoisonError};

use super::args::{require, write_out};
use super::guard::{call, Handle};
use super::result::{rungs_result, CallError};
use super::timing_machine::rungs_timing_status;

/// The latest status a handle published.
pub struct Published(Mutex<rungs_timing_status>);

impl Published {
    pub fn new(status: rungs_timing_status) -> Self {
        Published(Mutex::new(status))
    }

    /// Replace the copy (the game thread, leaving a call).
    pub fn publish(&self, status: rungs_timing_status) {
        // A copy of plain fields is whole even if a holder panicked.
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = status;
    }

    fn read(&self) -> rungs_timing_status {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A handle whose status is published.
pub trait PublishesStatus: Handle {
    fn published(&self) -> &Published;
}

/// The C function `function` reading the status `handle` published into
/// `out`: from any thread, from inside the handle's own callbacks, while
/// another thread is in a call on it. A poisoned handle is refused as by
/// every other call.
///
/// # Safety
/// `handle` is NULL or a live handle (not freed, and not being freed while
/// this runs); `out` is NULL or writable.
pub unsafe fn read_status<H: PublishesStatus>(
    function: &'static str,
    handle: *const H,
    out: *mut rungs_timing_status,
) -> rungs_result {
    call(function, || {
        require(handle, "the handle (first argument)")?;
        require(out, "out")?;
        // SAFETY: non-NULL and live by contract; only its guard's atomic and
        // the published copy's lock are touched, never the guarded state.
        let handle = unsafe { &*handle };
        if handle.guarded().is_poisoned() {
            return Err(CallError::Poisoned);
        }
        // SAFETY: non-NULL (checked), writable by contract.
        unsafe { write_out(out, handle.published().read()) };
        Ok(())
    })
}
