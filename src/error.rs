//! The one error type every fallible Rust API of rungs returns.
//!
//! Each variant maps onto exactly one C result code (`ffi::result`), so the
//! C ABI can report what went wrong without inventing codes per module.

use std::fmt;

/// What went wrong. The `&'static str` payloads say which argument or rule,
/// in words a game programmer can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A required pointer (C ABI) was NULL; names the argument.
    NullPointer(&'static str),
    /// An argument is outside its documented range.
    InvalidArgument(&'static str),
    /// A seat number that is not (or no longer) part of the game.
    UnknownSeat(u8),
    /// Bytes that do not decode: wrong length, bad field, broken invariant.
    Malformed(&'static str),
    /// The call is not valid in the object's current state (e.g. frames out of order).
    State(&'static str),
    /// A caller buffer is too small; `needed` bytes would fit.
    BufferTooSmall { needed: usize },
    /// An event type ID the engine did not register.
    UnregisteredEvent(u8),
    /// A fixed capacity is exhausted.
    Full(&'static str),
    /// The operating system refused an I/O operation.
    Io(std::io::ErrorKind),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NullPointer(what) => write!(f, "NULL pointer: {what}"),
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::UnknownSeat(seat) => write!(f, "unknown seat {seat}"),
            Error::Malformed(what) => write!(f, "malformed input: {what}"),
            Error::State(what) => write!(f, "not valid now: {what}"),
            Error::BufferTooSmall { needed } => {
                write!(f, "buffer too small: {needed} bytes needed")
            }
            Error::UnregisteredEvent(id) => write!(f, "event type {id} is not registered"),
            Error::Full(what) => write!(f, "capacity exhausted: {what}"),
            Error::Io(kind) => write!(f, "I/O error: {kind}"),
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
