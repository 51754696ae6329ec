//! Relay-sequenced lockstep (S10), sans-IO.
//!
//! A relay owns the match clock and gives every human order its execution
//! tick; clients execute the turn bundles it streams. The pieces:
//!
//! * [`ticket`]: seat admission (keyed MAC over match, seat, expiry, nonce)
//!   and the per-ticket and per-connection keys derived from it.
//! * Admission ([`CookieKey`]): the Hello path's return-routability cookie,
//!   replay rule and rate limits.
//! * [`Sequencer`]: one match's state machine (barrier, clock, tick
//!   assignment and refusals, turn log, bundle streams, presence, grace,
//!   ephemeral orders), set up by a [`MatchSetup`]; it compares the
//!   clients' state checksums ([`DesyncNotice`], [`DecidedRound`]) and cuts
//!   bundles into messages.
//! * [`DurableRecord`], [`MatchState`]: what a match keeps to survive a
//!   relay restart (the records a sequencer emits with persistence on, and
//!   the state they fold into); [`TurnLog`]: a match's whole turn log as a
//!   file, for replays.
//! * [`Relay`]: many matches behind one port: Hellos, tickets, one
//!   transport link per connection, routing.
//! * [`RelayClient`]: a player's side: Hello/Welcome, exactly-once order
//!   submission across reconnects, bundles in order, clock sync (S9),
//!   timing reports.
//! * The timing plan the relay announces (tick rate, bundle interval,
//!   look-ahead from a tick on) and both sides pace by; the sequencer runs
//!   the match's timing policy (S4) as the master, once per seat: each
//!   client's jitter buffer from its own link.
//!
//! Messages travel over rungs' own transport links (S8, [`crate::link`]):
//! numbered, acknowledged, resent until acked, authenticated with a key
//! that belongs to one connection of one ticket. The byte layouts are in
//! [`crate::wire::relay`]; `docs/relay.md` describes the whole protocol and
//! how relays scale.

mod admission;
pub(crate) mod checksums;
mod chunk;
mod client;
mod durable;
mod log_entry;
mod schedule;
mod seat_timing;
mod sequencer;
mod server;
mod setup;
pub mod ticket;
mod timing;
mod turn_log;

pub use admission::{CookieKey, HelloLimits};
pub use checksums::DecidedRound;
pub use client::{
    ClientConfig, ClientCounters, ClientEvent, RelayClient, SeatTurn, Turn, MAX_UNCONFIRMED,
};
pub use durable::{DurableRecord, MatchState};
pub use sequencer::{DesyncNotice, LogEntry, MatchCounters, MatchEvent, MatchSetup, Sequencer};
pub use server::{Relay, RelayConfig, RelayCounters, RelayEvent};
pub use setup::NO_TICK_LIMIT;
pub use timing::TimingPlan;
pub use turn_log::TurnLog;

use crate::link::{DropReason, Link, LinkConfig};
use crate::wire::packet::{decode, verify_tag, SessionKey};

/// The relay's seat number on every connection's link (clients use their
/// own seat, 0–15).
pub const RELAY_LINK_SEAT: u8 = 0xFF;

/// The link settings relay connections use by default: a 5 s liveness
/// timeout, everything else the link's defaults.
///
/// (Relay links once used a whole-packet piggyback budget to work around a
/// link stall behind a lost message larger than the budget; the link
/// re-sends such messages itself now, `tests/relay_link_stall.rs`.)
pub fn relay_link_config() -> LinkConfig {
    LinkConfig {
        liveness_timeout_us: Some(5_000_000),
        // Relay links answer every packet at once, as before acks could
        // ride on data (the relay's timing was tuned with them).
        max_ack_delay_us: 0,
        ..LinkConfig::default()
    }
}

/// Check a transport packet's tag under `key` for `local_seat` and its
/// structure, and hand it to `link`. The caller has already routed it (by
/// session id) and checked the sender seat. `from_new_address`: it came
/// from another address than the link's; it is taken only if it is the
/// newest packet yet (S8: an older one from elsewhere is a replay, and
/// `SpoofedAddress`).
fn receive_link_packet(
    link: &mut Link,
    key: &SessionKey,
    local_seat: u8,
    from_new_address: bool,
    now_us: u64,
    bytes: &[u8],
) -> Result<(), DropReason> {
    if !verify_tag(bytes, key, local_seat) {
        link.count_drop(DropReason::BadTag);
        return Err(DropReason::BadTag);
    }
    let packet = match decode(bytes) {
        Ok(p) => p,
        Err(e) => {
            let reason = e.into();
            link.count_drop(reason);
            return Err(reason);
        }
    };
    if from_new_address && !link.is_newest(packet.header.packet_number) {
        link.count_drop(DropReason::SpoofedAddress);
        return Err(DropReason::SpoofedAddress);
    }
    link.handle_packet(now_us, &packet, bytes.len())
}
