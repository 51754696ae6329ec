//! Byte layouts on the wire: event payloads (S7), transport packets (S8) and
//! the relay protocol (S10).
//! Every decoder validates its input and never panics.

pub mod cursor;
pub mod events;
pub mod packet;
pub mod relay;
pub mod turn;
