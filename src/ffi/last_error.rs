//! The calling thread's latest error message, kept for
//! `rungs_last_error_message`.
//!
//! Its own module so the guard (which records outcomes) and the result codes
//! (which read the message out) both use it without depending on each other.
//! The rule C sees, stated in the header at `rungs_last_error_message`: every
//! call that returns `rungs_result` replaces the message, with its error or
//! with nothing on success.

use std::cell::RefCell;

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Record `function: detail` as the calling thread's latest error.
pub(crate) fn record(function: &str, detail: &dyn std::fmt::Display) {
    use std::fmt::Write;
    LAST_ERROR.with(|slot| {
        let mut slot = slot.borrow_mut();
        slot.clear();
        // Writing into a String cannot fail.
        let _ = write!(slot, "{function}: {detail}");
    });
}

/// Forget the latest error: the call that just returned succeeded.
pub(crate) fn clear() {
    LAST_ERROR.with(|slot| slot.borrow_mut().clear());
}

/// Run `read` on the latest error message ("" when the latest call succeeded).
pub(crate) fn with<R>(read: impl FnOnce(&str) -> R) -> R {
    LAST_ERROR.with(|slot| read(&slot.borrow()))
}
