//! The C ABI (README, "Linking from C" and its ABI rules).
//!
//! Thin wrappers only: every function validates its arguments, calls the
//! public Rust API inside [`guard`], and maps the outcome to a
//! [`rungs_result`]. One file per exported object.
//!
//! Rules every file here follows:
//! - every fallible export returns `rungs_result`; outputs go through
//!   out-pointers, which are written only on success;
//! - enum-like inputs arrive as fixed-width integers and are validated;
//! - no panic crosses the boundary: object calls run in [`guard::with_object`],
//!   free functions in [`guard::catch`];
//! - callbacks run synchronously on the calling thread; re-entering the same
//!   object from one returns `RUNGS_ERR_REENTRANT`.

#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)]

pub mod clock;
pub mod guard;
pub mod ladder;
pub mod lockstep;
pub mod measure;
pub mod payload;
pub mod result;
pub mod session;
pub mod timing_machine;
pub mod transport;
pub mod types;
pub mod version;

pub use result::*;
