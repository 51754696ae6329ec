//! # rungs — the C library
//!
//! Adaptive network timing for lockstep games, behind a stable C ABI
//! (`include/rungs.h`). This crate is the top layer: the C API in [`ffi`]
//! over the sans-IO core (`rungs-core`) and the socket drivers
//! (`rungs-net`). Rust programs use those two crates directly; see
//! `ARCHITECTURE.md` for the layers.

#![deny(unsafe_op_in_unsafe_fn)]

// The C layer names the core's modules as its own (`crate::session::...`):
// the C API is a thin wrapper over them, one module per object.
pub(crate) use rungs_core::Error;
pub(crate) use rungs_core::{clock, error, link, relay, report, session, timing, wire};
pub(crate) use rungs_net as net;

pub mod ffi;
