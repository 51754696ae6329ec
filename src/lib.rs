//! # rungs — adaptive network timing for lockstep games
//!
//! A lockstep game executes every command on the same frame on every machine.
//! How far ahead commands are scheduled (the *look-ahead*) and how often packets
//! go out (the *send period*) decide input lag and stalls. rungs measures each
//! player's round trips, processing time and waits, and one player (the master)
//! moves the whole game up and down a ladder of ten timing rungs,
//! deterministically, with the frame rate to match.
//!
//! **Section numbers.** Comments and docs throughout the crate cite `S0`–`S10`
//! (and `S4.1`–`S4.7`): they are the sections of `docs/model.md` in the
//! repository, the model rungs implements in its own words. Points the model
//! leaves open are decided in `docs/decisions.md`.
//!
//! The crate is a set of sans-IO state machines: they take `now` and inputs
//! and return outputs. Sockets and threads live only in [`net`]. The C ABI in
//! [`ffi`] is a thin wrapper over the public Rust API.

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
