//! Relay-sequenced lockstep (S10), sans-IO.
//!
//! A relay owns the match clock and gives every human order its execution
//! tick; clients execute the turn bundles it streams. The pieces:
//!
//! * [`ticket`]: seat admission (keyed MAC over match, seat, expiry, nonce)
//!   and the per-ticket and per-connection keys derived from it.
//!
//! The byte layouts are in [`crate::wire::relay`]; `docs/relay.md` describes
//! the whole protocol and how relays scale.

pub mod sequencer;
pub mod ticket;
