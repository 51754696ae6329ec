//! The relay topology's own calls on `rungs_lockstep` (S10): orders of
//! every kind and their refusals, ephemeral orders, AI orders on their
//! decision tick, the initial-state checksum, and replays of a turn log.
//! They sit above both the lockstep session's C API and the relay's, which
//! they join.

use std::net::SocketAddr;

use super::args::{read_config, require, slice_in, write_optional, write_to};
use super::guard::{call, hand_out};
use super::lockstep::{
    lockstep_call, lockstep_config, rungs_lockstep, rungs_lockstep_config, LockstepObject,
};
use super::relay::{
    rungs_order_kind, rungs_relay_callbacks, RUNGS_ORDER_COMMAND, RUNGS_ORDER_EPHEMERAL,
    RUNGS_ORDER_QUIT,
};
use super::result::{rungs_result, CallError};
use super::transport::parse_address;
use crate::error::Error;
use crate::net::LockstepDriver;
use crate::relay::TurnLog;
use crate::session::{LockstepSession, OrderKind};

/// Set (or, with NULL, clear) the relay topology's callbacks of `ls`: which
/// of its orders the relay refused, and the ephemeral orders of each frame.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if callbacks->struct_size is too small.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_set_relay_callbacks(
    ls: *mut rungs_lockstep,
    callbacks: *const rungs_relay_callbacks,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_set_relay_callbacks", ls, |o| {
            o.relay_callbacks = if callbacks.is_null() {
                None
            } else {
                // SAFETY: non-NULL; struct_size checked before the rest is read.
                Some(read_config(callbacks, "callbacks")?)
            };
            Ok(())
        })
    }
}

/// Submit an order of `kind` (`RUNGS_ORDER_*`): `*out_id` (may be NULL)
/// receives its id for `order_refused` (0 when it cannot be refused later:
/// peer-to-peer, ephemeral), `*out_frame` (may be NULL) the earliest frame
/// it can run on. A quit is this player's game order for leaving (then keep
/// calling `rungs_lockstep_update` until it says LEFT); peer-to-peer it is a
/// command and `rungs_lockstep_leave` issued together.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls is NULL, or bytes is NULL
/// with len > 0; RUNGS_ERR_INVALID_ARGUMENT if kind is not a RUNGS_ORDER_* or
/// len is over 512 (relay) or one packet (peer-to-peer); RUNGS_ERR_FULL with
/// 256 orders not yet judged by the relay, or no room in the next turn;
/// RUNGS_ERR_STATE after leaving, for an ephemeral order peer-to-peer or while
/// the relay link is down, in a replay.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_submit_order(
    ls: *mut rungs_lockstep,
    kind: rungs_order_kind,
    bytes: *const u8,
    len: usize,
    out_id: *mut u64,
    out_frame: *mut u32,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_submit_order", ls, |o| {
            let kind = match kind {
                RUNGS_ORDER_COMMAND => OrderKind::Command,
                RUNGS_ORDER_QUIT => OrderKind::Quit,
                RUNGS_ORDER_EPHEMERAL => OrderKind::Ephemeral,
                other => return Err(Error::invalid_value(
                    "kind",
                    other,
                    "RUNGS_ORDER_COMMAND (0), RUNGS_ORDER_QUIT (1) or RUNGS_ORDER_EPHEMERAL (2)",
                )
                .into()),
            };
            let order = slice_in(bytes, len, "bytes")?;
            let receipt = o.session().submit_order(kind, order)?;
            write_optional(out_id, receipt.id);
            write_optional(out_frame, receipt.frame);
            Ok(())
        })
    }
}

/// Whether `rungs_lockstep_submit_checksum` compares the state after
/// `frame`: `*out` 1 or 0. Peer-to-peer when `frame` is a multiple of
/// `checksum_interval`; behind a relay, which compares the state *before*
/// every interval-th frame, when `frame + 1` is. One engine loop serves
/// both topologies by asking.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls or out is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_is_checksum_frame(
    ls: *mut rungs_lockstep,
    frame: u32,
    out: *mut u8,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_is_checksum_frame", ls, |o| {
            let due = o.session().is_checksum_frame(frame);
            write_to(out, "out", u8::from(due))
        })
    }
}

/// Behind a relay: your state checksum before frame 0 (the initial state),
/// compared with every other machine's like the others.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if checksum_interval is 0; RUNGS_ERR_STATE
/// peer-to-peer (machines compare states after frames there).
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_submit_initial_checksum(
    ls: *mut rungs_lockstep,
    checksum: u64,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_submit_initial_checksum", ls, |o| {
            o.session()
                .submit_initial_checksum(checksum)
                .map_err(CallError::from)
        })
    }
}

/// Behind a relay: your AI began a decision for the AI seat `seat` on frame
/// `tick` (call it from your game loop before frame `tick` runs, on every
/// machine). `*out_due` (may be NULL) receives the frame its orders run on,
/// `tick + ai_order_delay`; that frame does not run here until
/// `rungs_lockstep_ai_decision_end`, so an AI computed on another thread,
/// however long it takes, lands on the same frame on every machine.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if seat is not an AI seat of the match;
/// RUNGS_ERR_STATE peer-to-peer, before the relay welcomed this machine, for a
/// decision begun twice, or late (its frame already ran); RUNGS_ERR_FULL with
/// 256 decisions open.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_ai_decision_begin(
    ls: *mut rungs_lockstep,
    seat: u8,
    tick: u32,
    out_due: *mut u32,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_ai_decision_begin", ls, |o| {
            let due = o.session().begin_ai_decision(seat, tick)?;
            write_optional(out_due, due);
            Ok(())
        })
    }
}

/// Behind a relay: an order your AI decided for the AI seat `seat` at frame
/// `tick` (with the state before `tick` ran). Every machine computes the
/// same AI, so the order stays on this machine: it comes back through the
/// `command` callback with that seat on frame `tick + ai_order_delay`
/// (`*out_due`, may be NULL).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls is NULL, or bytes is NULL
/// with len > 0; RUNGS_ERR_INVALID_ARGUMENT if seat is not an AI seat of the
/// match or len is over 512; RUNGS_ERR_STATE peer-to-peer, before the relay
/// welcomed this machine, or late (that frame already ran here: begin the
/// decision on its frame); RUNGS_ERR_FULL with 4096 AI orders waiting.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_submit_ai_order_at(
    ls: *mut rungs_lockstep,
    seat: u8,
    tick: u32,
    bytes: *const u8,
    len: usize,
    out_due: *mut u32,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_submit_ai_order_at", ls, |o| {
            let order = slice_in(bytes, len, "bytes")?;
            let due = o.session().submit_ai_order_at(seat, tick, order)?;
            write_optional(out_due, due);
            Ok(())
        })
    }
}

/// Behind a relay: the decision `rungs_lockstep_ai_decision_begin` began for
/// `seat` at `tick` is in (submit its orders first); its frame may run.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls is NULL; RUNGS_ERR_STATE if
/// no such decision was begun, or peer-to-peer.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_ai_decision_end(
    ls: *mut rungs_lockstep,
    seat: u8,
    tick: u32,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_ai_decision_end", ls, |o| {
            o.session()
                .end_ai_decision(seat, tick)
                .map_err(CallError::from)
        })
    }
}

/// Make a game that replays a match's turn log (`turn_log`, `len` bytes, as
/// `rungs-relay export` writes it; docs/relay.md "Replays") instead of
/// talking to anyone: drive it with `rungs_lockstep_update` as usual. Every
/// frame is due at once; the `command` callback gets the match's commands
/// on their frames (your AI's orders as you submit them, as in the match),
/// `player_removed` its departures, and `desync` every frame whose
/// checksum (`rungs_lockstep_submit_checksum`,
/// `rungs_lockstep_submit_initial_checksum`) differs from what a seat
/// reported in the match, naming those seats: a desync verified offline.
/// UPDATE says LEFT after the log's last frame. `config` as for the relay
/// topology of that match: seats, the local seat (a human seat, whose view
/// you take) and checksum_interval must be the log's; the relay fields,
/// key and peers are not used; the socket is bound (to `bind_address`)
/// but never used.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if config or out is NULL, or
/// turn_log is NULL with a non-zero len; RUNGS_ERR_INVALID_ARGUMENT if config is invalid as
/// for `rungs_lockstep_new`, turn_log is not a turn log (the message says
/// what is wrong), or the seats or checksum interval differ from the log's;
/// RUNGS_ERR_IO if the socket cannot be bound; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_replay_new(
    config: *const rungs_lockstep_config,
    turn_log: *const u8,
    len: usize,
    now_us: u64,
    out: *mut *mut rungs_lockstep,
) -> rungs_result {
    call("rungs_lockstep_replay_new", || {
        require(out, "out")?;
        // SAFETY: read_config checks NULL and struct_size before the rest.
        let mut c = unsafe { read_config(config, "config")? };
        // SAFETY: `len` readable bytes by contract.
        let log = TurnLog::decode(unsafe { slice_in(turn_log, len, "turn_log")? })?;
        let bind = if c.bind_address.is_null() {
            SocketAddr::from(([127, 0, 0, 1], 0))
        } else {
            // SAFETY: non-NULL, NUL-terminated by contract.
            unsafe { parse_address(c.bind_address, "config->bind_address")? }
        };
        // The peer-to-peer checks do not apply: the replay builds its own
        // relay-topology session.
        c.topology = super::lockstep::RUNGS_TOPOLOGY_PEER_TO_PEER;
        if c.key == [0; 16] {
            c.key = [1; 16];
        }
        // SAFETY: the config's link_keys pointer by the caller's contract.
        let lockstep_config = unsafe { lockstep_config(&c)? };
        let session = LockstepSession::replay(&lockstep_config, &log, now_us)?;
        let driver = LockstepDriver::bind(bind, session)?;
        // SAFETY: `out` is NULL (refused) or writable.
        unsafe { hand_out(out, rungs_lockstep::new(LockstepObject::new(driver, &c))) }
    })
}
