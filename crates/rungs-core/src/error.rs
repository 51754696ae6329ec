//! The one error type every fallible Rust API of rungs returns.
//!
//! The rule, in one place:
//!
//! - [`Error::Invalid`] is the one way to say "this argument is wrong". It
//!   carries an [`InvalidArgument`]: the field (as the C header spells it,
//!   `config->seat_count`, or the Rust argument's name where there is no C
//!   name), what was got when the call has it (a number, or a short text
//!   such as "all zero"), and what was expected (a range, "1 to 16", never
//!   Rust syntax; or a rule, "a multiple of the send period"). A Rust caller
//!   matches on [`InvalidArgument::field`], [`InvalidArgument::got`] and
//!   [`InvalidArgument::expected`] instead of parsing the message.
//! - The message is composed from those parts, never written whole at the
//!   call: `config->seat_count is 0; expected 1 to 16` when the value is
//!   known, `seat_count must be 1 to 16` when it is not.
//! - The other variants say what is wrong that is not one argument: an
//!   unknown seat, bytes that do not decode, a call the object's state does
//!   not allow, a buffer too small, an unregistered event, a full capacity,
//!   an I/O refusal. [`Error::Detailed`] gives one of those a message built
//!   at the call (what was got, what was expected) while keeping its kind;
//!   an invalid argument never needs it, its parts already say that.
//! - Each variant maps onto exactly one C result code in the C library's
//!   `ffi::result`, so the C ABI reports what went wrong without inventing
//!   codes per module. What only a C call can suffer (a NULL pointer, a
//!   poisoned, re-entered or busy object, a caught panic) is the C layer's
//!   own error type, not this one: a Rust caller can never meet it.

use std::borrow::Cow;
use std::fmt;

use crate::wire::cursor::DecodeError;

/// What went wrong. The payloads say which argument or rule, in words a game
/// programmer can act on: argument and field names as the C header spells
/// them, ranges as "1 to 16" (never Rust syntax), and where the call knows
/// it, what was got and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// An argument is outside its documented range or breaks its rule:
    /// which one, what it was, what it must be.
    Invalid(InvalidArgument),
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
    /// The error in the box (a kind other than [`Invalid`](Error::Invalid)),
    /// with a message built at the call that says what was got and what was
    /// expected; it replaces the boxed error's own message, and the boxed
    /// error gives the kind (and the C code).
    Detailed(Box<Error>, String),
}

/// An argument a call refuses: which one, what it was, what it must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidArgument {
    field: Cow<'static, str>,
    got: Option<Got>,
    expected: Cow<'static, str>,
}

/// What an invalid argument was: its value, or a short description of it
/// where the value itself says nothing ("all zero", "not UTF-8").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Got {
    /// A whole number, shown in decimal.
    Number(i128),
    /// A text, shown as it is.
    Text(Cow<'static, str>),
}

impl InvalidArgument {
    /// The argument or field, as the C header spells it (`config->seat_count`),
    /// or the Rust argument's name where there is no C name.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What the argument was, when the call knows it.
    pub fn got(&self) -> Option<&Got> {
        self.got.as_ref()
    }

    /// What it must be: a range ("1 to 16") or a rule.
    pub fn expected(&self) -> &str {
        &self.expected
    }
}

impl fmt::Display for InvalidArgument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.got {
            Some(got) => write!(f, "{} is {got}; expected {}", self.field, self.expected),
            None => write!(f, "{} must be {}", self.field, self.expected),
        }
    }
}

impl fmt::Display for Got {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Got::Number(n) => write!(f, "{n}"),
            Got::Text(text) => f.write_str(text),
        }
    }
}

macro_rules! got_from_number {
    ($($t:ty),*) => {$(
        impl From<$t> for Got {
            fn from(n: $t) -> Got {
                Got::Number(i128::from(n))
            }
        }
    )*};
}
got_from_number!(u8, u16, u32, u64, i8, i16, i32, i64, i128);

impl From<usize> for Got {
    fn from(n: usize) -> Got {
        // usize is at most 64 bits on every target rungs builds for.
        Got::Number(n as i128)
    }
}

impl From<&'static str> for Got {
    fn from(text: &'static str) -> Got {
        Got::Text(Cow::Borrowed(text))
    }
}

impl From<String> for Got {
    fn from(text: String) -> Got {
        Got::Text(Cow::Owned(text))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Invalid(invalid) => invalid.fmt(f),
            Error::Detailed(_, what) => f.write_str(what),
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
    /// `field` is wrong and the call does not know its value: the message
    /// is "`field` must be `expected`".
    pub fn invalid(
        field: impl Into<Cow<'static, str>>,
        expected: impl Into<Cow<'static, str>>,
    ) -> Error {
        Error::Invalid(InvalidArgument {
            field: field.into(),
            got: None,
            expected: expected.into(),
        })
    }

    /// `field` is `got` where `expected` was expected: the message is
    /// "`field` is `got`; expected `expected`".
    pub fn invalid_value(
        field: impl Into<Cow<'static, str>>,
        got: impl Into<Got>,
        expected: impl Into<Cow<'static, str>>,
    ) -> Error {
        Error::Invalid(InvalidArgument {
            field: field.into(),
            got: Some(got.into()),
            expected: expected.into(),
        })
    }

    /// Bytes that do not decode as `layout`.
    pub fn malformed(layout: &'static str, error: DecodeError) -> Error {
        Error::Malformed(Malformed { layout, error })
    }

    /// This error with `message` (what was got, what was expected) in place
    /// of its own; for the kinds other than [`Invalid`](Error::Invalid),
    /// whose parts already say that.
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

    /// The invalid argument, if this error is one.
    pub fn invalid_argument(&self) -> Option<&InvalidArgument> {
        match self.kind() {
            Error::Invalid(invalid) => Some(invalid),
            _ => None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_argument_composes_its_message_from_its_parts() {
        let known = Error::invalid_value("config->seat_count", 0u8, "1 to 16");
        assert_eq!(
            known.to_string(),
            "config->seat_count is 0; expected 1 to 16"
        );
        let unknown = Error::invalid("seat_count", "1 to 16");
        assert_eq!(unknown.to_string(), "seat_count must be 1 to 16");
        let text = Error::invalid_value("key", "all zero", "a secret key");
        assert_eq!(text.to_string(), "key is all zero; expected a secret key");
    }

    #[test]
    fn a_rust_caller_matches_on_the_parts() {
        let e = Error::invalid_value("fps", 0u8, "1 to 255");
        let invalid = e.invalid_argument().expect("an invalid argument");
        assert_eq!(invalid.field(), "fps");
        assert_eq!(invalid.got(), Some(&Got::Number(0)));
        assert_eq!(invalid.expected(), "1 to 255");
        assert!(Error::State("x").invalid_argument().is_none());
    }
}
