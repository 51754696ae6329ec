//! The C ABI (`docs/c-api.md`: linking from C and the ABI rules).
//!
//! Thin wrappers only: every function reads its arguments with [`args`],
//! calls the public Rust API inside [`guard`], and maps the outcome to a
//! [`rungs_result`] and the thread's message (`result::finish`). One file
//! per exported object, plus the shared pieces: [`args`] (pointers, buffers,
//! configs, ranges), [`types`] (shared structs, one typedef per callback
//! signature, seat fields), [`guard`] (panics, poisoning, one call at a time),
//! [`result`] (codes and messages) over `last_error` (the per-thread store).
//!
//! Rules every file here follows:
//! - every fallible export returns `rungs_result`; outputs go through
//!   out-pointers, which are written only on success;
//! - its doc comment ends with a `Returns:` paragraph naming every code it
//!   can return;
//! - messages name the C function and the argument or config field, and say
//!   what was got and what was expected (`rungs_clock_new:
//!   config->sample_window is 0; expected 1 to 64`); no Rust syntax;
//! - enum-like inputs arrive as fixed-width integers and are validated;
//! - no panic crosses the boundary: object calls run in
//!   [`guard::object_call`], free functions in [`guard::call`];
//! - callbacks run synchronously on the calling thread; re-entering the same
//!   object from one returns `RUNGS_ERR_REENTRANT`, and a second thread
//!   calling the same object meanwhile gets `RUNGS_ERR_BUSY`.

#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)]

pub mod args;
pub mod clock;
pub mod guard;
pub mod ladder;
mod last_error;
pub mod lockstep;
pub mod lockstep_relay;
pub mod measure;
pub mod payload;
pub mod relay;
pub mod report;
pub mod result;
pub mod session;
mod snapshot;
pub mod timing_machine;
pub mod transport;
pub mod types;
pub mod version;

pub use result::*;
