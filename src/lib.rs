//! # rungs — adaptive network timing for lockstep games
//!
//! A lockstep game executes every command on the same frame on every machine.
//! How far ahead commands are scheduled (the *look-ahead*) and how often packets
//! go out (the *send period*) decide input lag and stalls. rungs measures each
//! player's round trips, processing time and waits, and one player (the master)
//! moves the whole game up and down a ladder of ten timing rungs,
//! deterministically, with the frame rate to match.
//!
//! The crate is a set of sans-IO state machines (see `CONVENTIONS.md`): they
//! take `now` and inputs and return outputs. Sockets and threads live only in
//! [`net`]. The C ABI in [`ffi`] is a thin wrapper over the public Rust API.
//!
//! Section references (S1–S10) point into the project's `SPEC.md`.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod error;

pub mod clock;
pub mod link;
pub mod net;
pub mod relay;
pub mod report;
pub mod session;
pub mod sim;
pub mod timing;
pub mod wire;

pub use error::{Error, Result};

pub mod ffi;
