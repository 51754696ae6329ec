//! Byte layouts on the wire: event payloads (S7), transport packets (S8),
//! the lockstep link messages (S5, S8, S9) and the relay protocol (S10).
//!
//! # The codec contract
//!
//! Every decoder here — [`events`], [`packet`], [`turn`] and [`relay`], and
//! the relay's stored records built on the same toolkit — keeps one contract,
//! because each reads bytes an attacker or a broken peer may have chosen:
//!
//! * **Never panic.** Every read goes through [`cursor::Reader`], which
//!   checks the length before it reads; no decoder indexes received bytes.
//! * **Never allocate.** A decoder returns values and borrowed slices of
//!   its input. The one allowance: a decoded lockstep turn owns its
//!   commands, so [`turn`] allocates at most the message's own length (and
//!   nothing else with [`turn::decode_reusing`]).
//! * **Refuse trailing bytes.** A layout is exactly as long as its fields:
//!   bytes left over are an error ([`cursor::Reader::finish`]), never
//!   ignored, so one meaning has one byte string.
//! * **Validate in layout order.** Length bounds, then magic, version and
//!   kind, then each field in the order its table lists it, and the rules
//!   that join fields once they are read: the first thing wrong is the one
//!   reported, the same on every machine.
//! * **One error.** Every refusal is a [`cursor::DecodeError`] saying what
//!   was wrong and, where it applies, what was got and what was expected;
//!   the event payloads, whose errors reach the C API, carry it in
//!   [`crate::Error::Malformed`] with the layout's name.
//!
//! Encoders write little-endian fields in layout order through
//! [`cursor::PutLe`]: into a caller buffer with [`cursor::Writer`] (a
//! message is written whole or reported as not fitting) or into an owned
//! `Vec<u8>`. Each codec's module doc carries its layout tables and points
//! here for the contract.

pub mod cursor;
pub mod events;
pub mod packet;
pub mod relay;
pub mod turn;
