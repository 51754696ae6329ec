//! The one error type every fallible Rust API of rungs returns.
//!
//! Each variant maps onto exactly one C result code in the C library's
//! `ffi::result`, so the C ABI reports what went wrong without inventing
//! codes per module. What only a C call can suffer (a NULL pointer, a
//! poisoned, re-entered or busy object, a caught panic) is the C layer's
//! own error type, not this one: a Rust caller can never meet it.

use std::fmt;

use crate::wire::cursor::DecodeError;

/// What went wrong. The payloads say which argument or rule, in words a game
/// programmer can act on: argument and field names as the C header spells
/// them, ranges as "1 to 16" (never Rust syntax), and where the call knows
/// it, what was got and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// An argument is outside its documented range.
    InvalidArgument(&'static str),
    /// An argument is outside its documented range; the message, built at
    /// the call, names it and says what was got and what was expected
    /// (`config->seat_count is 0; expected 1 to 16`).
    InvalidValue(String),
    /// A seat number that is not (or no longer) part of the game.
    UnknownSeat(u8),
    /// Bytes that do not decode: which layout, and what was wrong with them
    /// (length, magic, version, kind, or the field and the rule it breaks).
    Malformed(Malformed),
    /// The call is not valid in the object's current state (e.g. frames out of order).
    State(&'static str),
    /// A caller buffer is too small; `needed` bytes would fit.
    BufferTooSmall {
        /// The size that would fit, bytes.
        needed: usize,
    },
    /// An event type ID the engine did not register.
    UnregisteredEvent(u8),
    /// A fixed capacity is exhausted.
    Full(&'static str),
    /// The operating system refused an I/O operation.
    Io(std::io::ErrorKind),
    /// The error in the box, with a message built at the call that says what
    /// was got and what was expected; it replaces the boxed error's own
    /// message, and the boxed error gives the kind (and the C code).
    Detailed(Box<Error>, String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidArgument(what) => f.write_str(what),
            Error::InvalidValue(what) | Error::Detailed(_, what) => f.write_str(what),
            Error::UnknownSeat(seat) => {
                write!(
                    f,
                    "seat {seat} is not a seat of this game, or it was removed"
                )
            }
            Error::Malformed(what) => write!(f, "malformed input: {what}"),
            Error::State(what) => write!(f, "not valid now: {what}"),
            Error::BufferTooSmall { needed } => {
                write!(f, "buffer too small: expected room for {needed} bytes")
            }
            Error::UnregisteredEvent(id) => {
                write!(
                    f,
                    "event type {id} is not one of the event IDs in the config"
                )
            }
            Error::Full(what) => write!(f, "capacity exhausted: {what}"),
            Error::Io(kind) => write!(f, "the operating system refused: {kind}"),
        }
    }
}

/// Bytes that do not decode as `layout`, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed {
    /// The layout's name as the docs give it ("detailed NETWORK_REPORT").
    pub layout: &'static str,
    /// What was wrong, with what was got and expected where that applies.
    pub error: DecodeError,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.error {
            // A rule names its field itself ("TIMING frame rate must be 1 to 255").
            DecodeError::Invalid(rule) => f.write_str(rule),
            error => write!(f, "{} {error}", self.layout),
        }
    }
}

impl Error {
    /// Bytes that do not decode as `layout`.
    pub fn malformed(layout: &'static str, error: DecodeError) -> Error {
        Error::Malformed(Malformed { layout, error })
    }

    /// This error with `message` (what was got, what was expected) in place
    /// of its own.
    pub fn detailed(self, message: String) -> Error {
        Error::Detailed(Box::new(self), message)
    }

    /// The error without any [`Detailed`](Error::Detailed) message: the kind.
    pub fn kind(&self) -> &Error {
        match self {
            Error::Detailed(inner, _) => inner.kind(),
            other => other,
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e.kind())
    }
}

/// Shorthand used throughout the crate.
pub type Result<T> = std::result::Result<T, Error>;
