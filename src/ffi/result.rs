//! Result codes and error details for C callers.
//!
//! Codes are explicitly numbered and never renumbered: new codes are added at
//! the end. Details of the latest error on the calling thread are copied into
//! a caller buffer by `rungs_last_error_message`.

use std::cell::RefCell;

use crate::error::Error;

/// The outcome of every fallible call. `RUNGS_OK` (0) is success; every other
/// value is one of the `RUNGS_ERR_*` codes, named by `rungs_result_str`.
pub type rungs_result = i32;

/// Success.
pub const RUNGS_OK: rungs_result = 0;
/// A required pointer argument (handle, out-pointer, buffer) was NULL.
pub const RUNGS_ERR_NULL_POINTER: rungs_result = 1;
/// An argument is out of its documented range (including enum values).
pub const RUNGS_ERR_INVALID_ARGUMENT: rungs_result = 2;
/// A panic was caught inside the library; the object is now poisoned.
pub const RUNGS_ERR_PANIC: rungs_result = 3;
/// The object was poisoned by an earlier caught panic; only `_free` works.
pub const RUNGS_ERR_POISONED: rungs_result = 4;
/// The object was called again from inside one of its own callbacks.
pub const RUNGS_ERR_REENTRANT: rungs_result = 5;
/// The seat is not (or no longer) part of the game.
pub const RUNGS_ERR_UNKNOWN_SEAT: rungs_result = 6;
/// A caller buffer is too small; nothing was written.
pub const RUNGS_ERR_BUFFER_TOO_SMALL: rungs_result = 7;
/// Input bytes do not decode (length, field range or invariant).
pub const RUNGS_ERR_MALFORMED: rungs_result = 8;
/// The call is not valid in the object's current state.
pub const RUNGS_ERR_STATE: rungs_result = 9;
/// The event type ID was not registered at setup.
pub const RUNGS_ERR_UNREGISTERED_EVENT: rungs_result = 10;
/// A fixed capacity is exhausted.
pub const RUNGS_ERR_FULL: rungs_result = 11;
/// The operating system refused an I/O operation.
pub const RUNGS_ERR_IO: rungs_result = 12;

impl Error {
    /// The C result code for this error.
    pub fn code(&self) -> rungs_result {
        match self {
            Error::NullPointer(_) => RUNGS_ERR_NULL_POINTER,
            Error::InvalidArgument(_) => RUNGS_ERR_INVALID_ARGUMENT,
            Error::UnknownSeat(_) => RUNGS_ERR_UNKNOWN_SEAT,
            Error::Malformed(_) => RUNGS_ERR_MALFORMED,
            Error::State(_) => RUNGS_ERR_STATE,
            Error::BufferTooSmall { .. } => RUNGS_ERR_BUFFER_TOO_SMALL,
            Error::UnregisteredEvent(_) => RUNGS_ERR_UNREGISTERED_EVENT,
            Error::Full(_) => RUNGS_ERR_FULL,
            Error::Io(_) => RUNGS_ERR_IO,
        }
    }
}

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Remember `text` as the calling thread's latest error detail.
pub(crate) fn set_last_error(text: &str) {
    LAST_ERROR.with(|slot| {
        let mut slot = slot.borrow_mut();
        slot.clear();
        slot.push_str(text);
    });
}

/// Turn a Rust outcome into a result code, recording the detail of an error.
pub(crate) fn to_code(outcome: crate::error::Result<()>) -> rungs_result {
    match outcome {
        Ok(()) => RUNGS_OK,
        Err(e) => {
            set_last_error(&e.to_string());
            e.code()
        }
    }
}

/// The name of a result code, e.g. `"RUNGS_ERR_NULL_POINTER"`; `"RUNGS_ERR_UNKNOWN_CODE"`
/// for a value no version of rungs has used. The string is static: never free it.
#[no_mangle]
pub extern "C" fn rungs_result_str(code: rungs_result) -> *const libc::c_char {
    let name: &'static [u8] = match code {
        RUNGS_OK => b"RUNGS_OK\0",
        RUNGS_ERR_NULL_POINTER => b"RUNGS_ERR_NULL_POINTER\0",
        RUNGS_ERR_INVALID_ARGUMENT => b"RUNGS_ERR_INVALID_ARGUMENT\0",
        RUNGS_ERR_PANIC => b"RUNGS_ERR_PANIC\0",
        RUNGS_ERR_POISONED => b"RUNGS_ERR_POISONED\0",
        RUNGS_ERR_REENTRANT => b"RUNGS_ERR_REENTRANT\0",
        RUNGS_ERR_UNKNOWN_SEAT => b"RUNGS_ERR_UNKNOWN_SEAT\0",
        RUNGS_ERR_BUFFER_TOO_SMALL => b"RUNGS_ERR_BUFFER_TOO_SMALL\0",
        RUNGS_ERR_MALFORMED => b"RUNGS_ERR_MALFORMED\0",
        RUNGS_ERR_STATE => b"RUNGS_ERR_STATE\0",
        RUNGS_ERR_UNREGISTERED_EVENT => b"RUNGS_ERR_UNREGISTERED_EVENT\0",
        RUNGS_ERR_FULL => b"RUNGS_ERR_FULL\0",
        RUNGS_ERR_IO => b"RUNGS_ERR_IO\0",
        _ => b"RUNGS_ERR_UNKNOWN_CODE\0",
    };
    name.as_ptr().cast()
}

/// Copy the calling thread's latest error detail (NUL-terminated, truncated to
/// fit) into `buf` of `cap` bytes. `*out_len`, when not NULL, receives the full
/// length without the NUL, so a caller can retry with a larger buffer.
/// An empty string means no error has been recorded on this thread.
#[no_mangle]
pub unsafe extern "C" fn rungs_last_error_message(
    buf: *mut libc::c_char,
    cap: usize,
    out_len: *mut usize,
) -> rungs_result {
    super::guard::catch(|| {
        LAST_ERROR.with(|slot| {
            let text = slot.borrow();
            let bytes = text.as_bytes();
            if !out_len.is_null() {
                // SAFETY: the caller passes a valid pointer or NULL (checked).
                unsafe { *out_len = bytes.len() };
            }
            if buf.is_null() {
                return if cap == 0 {
                    Ok(())
                } else {
                    Err(Error::InvalidArgument("buf is NULL but cap > 0"))
                };
            }
            if cap == 0 {
                return Ok(());
            }
            let n = bytes.len().min(cap - 1);
            // SAFETY: buf points to at least `cap` writable bytes (caller contract), n < cap.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
            Ok(())
        })
    })
}
