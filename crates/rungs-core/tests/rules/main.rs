//! The core's rules judged from outside: payload and schedule properties,
//! frame readiness, a Tiberian Sun engine's rules, transport validation,
//! back-pressure and restarts, a stalled relay link. Sans-IO: no sockets, no
//! simulator.
//!
//! One test binary for many files: each file is a module, the helpers
//! they share are modules here too.

mod timing_payload;

mod frame_readiness;
mod payload_properties;
mod protocol_mismatch;
mod relay_link_stall;
mod schedule_properties;
mod transport_backpressure;
mod transport_restart;
mod transport_validation;
mod ts_engine_rules;
