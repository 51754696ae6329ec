//! Result codes and error messages for C callers.
//!
//! Codes are explicitly numbered and never renumbered: new codes are added at
//! the end. The message of the latest call is kept per thread
//! (`last_error`) and copied out by `rungs_last_error_message`.
//! This module turns a call's outcome into its code and message
//! (`finish`); the guard calls it and nothing here depends on the guard.

use std::fmt;

use super::args::{slice_out, write_optional};
use super::last_error;
use crate::error::Error;

/// The outcome of every fallible call. `RUNGS_OK` (0) is success; every other
/// value is one of the `RUNGS_ERR_*` codes, named by `rungs_result_str`, and
/// `rungs_last_error_message` says what went wrong (it names the function,
/// the argument or config field, what was got and what was expected). Each
/// function's comment lists the codes it returns. Every call on an object
/// can return `RUNGS_ERR_NULL_POINTER` (NULL handle), `RUNGS_ERR_REENTRANT`
/// (from one of the object's own callbacks), `RUNGS_ERR_BUSY` (another
/// thread is inside a call on it), `RUNGS_ERR_POISONED` and `RUNGS_ERR_PANIC`;
/// a refused call changes nothing.
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
/// The object was called again from inside one of its own callbacks, on the
/// same thread (call it after the callback returns).
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
/// Another thread is inside a call on the same object. A handle is used from
/// one thread at a time; the refused call changed nothing and may be retried
/// once the other thread's call has returned.
pub const RUNGS_ERR_BUSY: rungs_result = 13;

/// What a C call fails with: an error of the Rust API, or one only the C
/// boundary can have. Each maps onto one `RUNGS_ERR_*` code, and its
/// message is the thread's last error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// An error of the Rust API (its own code and message).
    Core(Error),
    /// A required pointer was NULL; names the argument.
    NullPointer(&'static str),
    /// A pointer argument is NULL while its length is not 0: NULL is
    /// accepted only for an empty buffer.
    NullWithLength { name: &'static str, len: usize },
    /// The object was poisoned by an earlier caught panic.
    Poisoned,
    /// The object was called from inside one of its own callbacks.
    Reentrant,
    /// Another thread is inside a call on the same object.
    Busy,
    /// A panic was caught inside the library.
    Panic,
    /// The error in the box, with a message built at the call in place of
    /// its own (the box gives the code).
    Detailed(Box<CallError>, String),
}

/// What the body of a C call returns.
pub type Result<T> = std::result::Result<T, CallError>;

impl From<Error> for CallError {
    fn from(e: Error) -> CallError {
        CallError::Core(e)
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Core(e) => e.fmt(f),
            CallError::Detailed(_, message) => f.write_str(message),
            CallError::NullPointer(what) => write!(f, "{what} is NULL"),
            CallError::NullWithLength { name, len } => write!(
                f,
                "{name} is NULL but its length is {len}; expected a valid pointer, or a length of 0"
            ),
            CallError::Poisoned => f.write_str(
                "the object was poisoned by an earlier panic; only its _free function works",
            ),
            CallError::Reentrant => f.write_str(
                "called from inside one of the same object's callbacks; \
                 call it after the callback returns",
            ),
            CallError::Busy => f.write_str(
                "another thread is inside a call on the same object; \
                 use a handle from one thread at a time",
            ),
            CallError::Panic => {
                f.write_str("a panic was caught inside rungs; the object is poisoned")
            }
        }
    }
}

impl CallError {
    /// The C result code for this error.
    pub fn code(&self) -> rungs_result {
        match self {
            CallError::Core(e) => e.code(),
            CallError::NullPointer(_) | CallError::NullWithLength { .. } => RUNGS_ERR_NULL_POINTER,
            CallError::Poisoned => RUNGS_ERR_POISONED,
            CallError::Reentrant => RUNGS_ERR_REENTRANT,
            CallError::Busy => RUNGS_ERR_BUSY,
            CallError::Panic => RUNGS_ERR_PANIC,
            CallError::Detailed(inner, _) => inner.code(),
        }
    }

    /// The core error inside, if this is one (after any detail): what a
    /// test matches on.
    #[cfg(test)]
    pub(crate) fn kind(&self) -> Option<&Error> {
        match self {
            CallError::Core(e) => Some(e.kind()),
            CallError::Detailed(inner, _) => inner.kind(),
            _ => None,
        }
    }

    /// This error with `message` in place of its own.
    pub fn detailed(self, message: String) -> CallError {
        match self {
            CallError::Core(e) => CallError::Core(e.detailed(message)),
            other => CallError::Detailed(Box::new(other), message),
        }
    }
}

/// The C result code of a core error: the mapping lives in the C layer, the
/// only place that has result codes.
pub(crate) trait ResultCode {
    /// The C result code for this error.
    fn code(&self) -> rungs_result;
}

impl ResultCode for Error {
    fn code(&self) -> rungs_result {
        match self {
            Error::Invalid(_) => RUNGS_ERR_INVALID_ARGUMENT,
            Error::UnknownSeat(_) => RUNGS_ERR_UNKNOWN_SEAT,
            Error::Malformed(_) => RUNGS_ERR_MALFORMED,
            Error::State(_) => RUNGS_ERR_STATE,
            Error::BufferTooSmall { .. } => RUNGS_ERR_BUFFER_TOO_SMALL,
            Error::UnregisteredEvent(_) => RUNGS_ERR_UNREGISTERED_EVENT,
            Error::Full(_) => RUNGS_ERR_FULL,
            Error::Io(_) => RUNGS_ERR_IO,
            Error::Detailed(inner, _) => inner.code(),
        }
    }
}

/// The code of `function`'s outcome; the thread's message becomes
/// `function: detail` on an error and is cleared on success (the rule stated
/// at `rungs_last_error_message`).
pub(crate) fn finish(function: &str, outcome: Result<()>) -> rungs_result {
    match outcome {
        Ok(()) => {
            last_error::clear();
            RUNGS_OK
        }
        Err(e) => {
            last_error::record(function, &e);
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
        RUNGS_ERR_BUSY => b"RUNGS_ERR_BUSY\0",
        _ => b"RUNGS_ERR_UNKNOWN_CODE\0",
    };
    name.as_ptr().cast()
}

/// Copy the calling thread's error message — what the latest call that
/// returned `rungs_result` reported, empty if it succeeded — NUL-terminated
/// and truncated to fit, into `buf` of `cap` bytes. `*out_len`,
/// when not NULL, receives the full length without the NUL, so a caller can
/// retry with a larger buffer; `buf` may be NULL when `cap` is 0.
///
/// How long a message stays: every function that returns `rungs_result`
/// replaces the calling thread's message when it returns, with its own error
/// (`rungs_session_new: config->seat_count is 0; expected 1 to 16`) or with
/// the empty string when it returns `RUNGS_OK`. So read the message right
/// after the call that failed, on the same thread, before calling rungs
/// again; an empty message means the latest call succeeded. Two exceptions
/// leave the message as it is: this function, and `rungs_result_str`.
/// Functions that return no `rungs_result` (`rungs_abi_version`,
/// `rungs_is_report_frame`, ...) never touch it. Calls made from inside a
/// callback replace it too, but the outer call replaces it again when it
/// returns. Each thread has its own message.
///
/// Returns: RUNGS_OK (also when the message is empty);
/// RUNGS_ERR_NULL_POINTER if buf is NULL but cap is not 0 (nothing written,
/// the message kept); RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_last_error_message(
    buf: *mut libc::c_char,
    cap: usize,
    out_len: *mut usize,
) -> rungs_result {
    // Nothing here can panic, but no panic may cross into C either.
    let copy = std::panic::AssertUnwindSafe(|| {
        last_error::with(|text| {
            let bytes = text.as_bytes();
            // SAFETY: the caller passes NULL or a writable pointer.
            unsafe { write_optional(out_len, bytes.len()) };
            // SAFETY: buf is NULL or valid for writes of `cap` bytes (caller contract).
            let buf = match unsafe { slice_out(buf.cast::<u8>(), cap, "buf") } {
                Ok(buf) => buf,
                Err(e) => return e.code(),
            };
            if let Some(room) = buf.len().checked_sub(1) {
                let n = bytes.len().min(room);
                buf[..n].copy_from_slice(&bytes[..n]);
                buf[n] = 0;
            }
            RUNGS_OK
        })
    });
    std::panic::catch_unwind(copy).unwrap_or(RUNGS_ERR_PANIC)
}
