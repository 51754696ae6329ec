//! `rungs_lockstep`: a whole lockstep game from C — rungs carries the
//! engine's commands over its own UDP transport, runs the adaptive timing,
//! paces the frames and hands back the commands each frame executes (S5,
//! S8, S9). See `session::lockstep` for the protocol.
//!
//! The engine's loop: `rungs_lockstep_update(now)` as often as it likes (it
//! reads the socket, fires timers, runs at most one due frame, sends); the
//! executed commands arrive through the `command` callback during that call;
//! `next_us` says when to call again at the latest, and a loop that sleeps
//! can wait on `rungs_lockstep_socket` for a datagram until then. The loop
//! itself is `rungs_net::LockstepDriver`, shared with Rust callers;
//! this file only converts.
//!
//! Every object call can also return `RUNGS_ERR_NULL_POINTER` (the handle),
//! `RUNGS_ERR_REENTRANT` (from inside a callback), `RUNGS_ERR_BUSY` (another
//! thread is inside a call on it), `RUNGS_ERR_POISONED` (a call panicked
//! earlier) and `RUNGS_ERR_PANIC`; every message starts with the function's
//! name.

use std::ffi::c_void;
use std::net::SocketAddr;

use super::args::{
    field_offset, in_range, read_grown_config, require, reserved_zero, slice_in, write_optional,
    write_out, write_to,
};
use super::guard::{call, free_call, hand_out, object_call, Guarded, Handle};
use super::result::rungs_result;
use super::result::{CallError, Result};
use super::snapshot::{read_status, Published, PublishesStatus};
use super::timing_machine::{
    deliver_output, rungs_timing_callbacks, rungs_timing_status, status_to_c,
};
use super::transport::rungs_socket;
use super::transport::{
    parse_address, RUNGS_LINK_EVENT_LOST, RUNGS_LINK_EVENT_RECOVERED, RUNGS_LINK_EVENT_RESTARTED,
};
use super::types::rungs_policy;
use super::types::{
    human_seats, local_seat, rungs_command_fn, rungs_desync_fn, rungs_frame_rate_changed_fn,
    rungs_link_event_fn, rungs_player_message_fn, rungs_seat_event_fn, rungs_timing_changed_fn,
    timing_policy,
};
use super::version::{deliver_mismatch, MismatchCallback};
use crate::error::Error;
use crate::link::LinkConfig;
use crate::net::{LockstepDriver, RawSocket};
use crate::relay::ticket::{Credentials, LinkSecret};
use crate::report::MAX_SEATS;
use crate::session::{
    Advance, LockstepConfig, LockstepSession, RelaySettings, SessionEvent, Topology,
    DEFAULT_JITTER_TICKS,
};
use crate::timing::MachineConfig;
use crate::wire::SessionKey;

/// What `rungs_lockstep_update` did, one of `RUNGS_LOCKSTEP_*`.
pub type rungs_lockstep_outcome = i32;

/// `rungs_lockstep_update` ran a frame; its commands went to the callback.
pub const RUNGS_LOCKSTEP_RAN: rungs_lockstep_outcome = 0;
/// The next frame is not due yet.
pub const RUNGS_LOCKSTEP_NOT_DUE: rungs_lockstep_outcome = 1;
/// The next frame is due but waits for other players' turns (`waiting_for`).
pub const RUNGS_LOCKSTEP_WAITING: rungs_lockstep_outcome = 2;
/// This player has left the game.
pub const RUNGS_LOCKSTEP_LEFT: rungs_lockstep_outcome = 3;

/// How the machines of a game connect, one of `RUNGS_TOPOLOGY_*`.
pub type rungs_topology = u32;

/// `rungs_lockstep_config.topology`: a link to every other human seat
/// (`rungs_lockstep_add_peer`), turns and timing agreed between machines.
pub const RUNGS_TOPOLOGY_PEER_TO_PEER: rungs_topology = 0;
/// `rungs_lockstep_config.topology`: one link to a relay (S10) that gives
/// every command its frame and owns the clock; a frame is one relay tick,
/// so the relay's tick rate is the game's frame rate. Same callbacks,
/// checksums, status, stats and update loop; no peers to add. The relay
/// link shows in `link_event` as seat `RUNGS_RELAY_SEAT`.
pub const RUNGS_TOPOLOGY_RELAY: rungs_topology = 1;
/// The seat number of the relay in `link_event` (relay topology): LOST when
/// the link to the relay is lost (rungs reconnects by itself and resends
/// what the relay has not confirmed), RECOVERED when it is back, RESTARTED
/// when the relay, restored from its journal, lost the journal's tail beyond
/// this machine's frame (reload the game and run again from frame 0). A
/// relay without this match's turn log at all refuses this machine instead:
/// `rungs_lockstep_update` returns RUNGS_ERR_STATE ("the relay lost this
/// match's turn log").
pub const RUNGS_RELAY_SEAT: u8 = 0xFF;
/// Default `relay_jitter_ticks`.
pub const RUNGS_RELAY_DEFAULT_JITTER_TICKS: u32 = 2;

const _: () = assert!(RUNGS_RELAY_SEAT == crate::relay::RELAY_LINK_SEAT);
const _: () = assert!(RUNGS_RELAY_DEFAULT_JITTER_TICKS == DEFAULT_JITTER_TICKS);

const _: () = assert!(std::mem::size_of::<rungs_socket>() == std::mem::size_of::<RawSocket>());

/// Callbacks, each optional (NULL), run inside `rungs_lockstep_update` on the
/// calling thread; calling back into the same object returns `RUNGS_ERR_REENTRANT`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rungs_lockstep_callbacks {
    pub user: *mut c_void,
    pub command: rungs_command_fn,
    pub timing_changed: rungs_timing_changed_fn,
    pub frame_rate_changed: rungs_frame_rate_changed_fn,
    pub player_message: rungs_player_message_fn,
    pub master_changed: rungs_seat_event_fn,
    pub player_removed: rungs_seat_event_fn,
    pub desync: rungs_desync_fn,
    pub link_event: rungs_link_event_fn,
}

/// How to set up a lockstep game on this machine.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rungs_lockstep_config {
    /// `sizeof(rungs_lockstep_config)`.
    pub struct_size: u32,
    /// The rate the game speed allows, 1–255 (S4.2).
    pub speed_fps: u8,
    /// Seats in house order, 1–16.
    pub seat_count: u8,
    /// This machine's seat (a human seat).
    pub local_seat: u8,
    /// `RUNGS_POLICY_ADAPTIVE` (0) or `RUNGS_POLICY_TRACKING`; the same on
    /// every machine of a game.
    pub policy: rungs_policy,
    /// Bit `i` set: seat `i` is a human player (with a machine).
    pub human_seat_mask: u32,
    /// The game's session id and 128-bit key, the same on every machine (S8).
    pub session_id: u32,
    pub key: [u8; 16],
    /// Frames between state checksums (`rungs_lockstep_submit_checksum`); 0 for none.
    pub checksum_interval: u32,
    /// Local address to bind, `"ip:port"`; NULL for `"0.0.0.0:0"`.
    pub bind_address: *const libc::c_char,
    pub callbacks: rungs_lockstep_callbacks,
    /// Per-pair link keys (S8): `link_key_count` entries, one per other
    /// human seat that has its own key with this machine; NULL and 0 for
    /// none (every link then uses `key`). With a key per pair, no player can
    /// sign a packet as another; the single game `key` cannot prevent that.
    pub link_keys: *const rungs_link_key,
    pub link_key_count: usize,
    /// This run's connection epoch (S8); 0: taken from the wall clock
    /// (milliseconds modulo 2^32), which is what a restarted program needs.
    pub epoch: u32,
    /// `RUNGS_TOPOLOGY_PEER_TO_PEER` or `RUNGS_TOPOLOGY_RELAY`. In the relay
    /// topology `session_id`, `key`, `link_keys` and `epoch` are unused
    /// (`key` may be all zero), and the fields below say how to reach the
    /// relay, as the lobby handed them out (`rungs_relay_ticket_issue`,
    /// `rungs_relay_credentials_parse`).
    pub topology: rungs_topology,
    /// Relay: the relay's address, `"ip:port"`.
    pub relay_address: *const libc::c_char,
    /// Relay: the ticket, `relay_ticket_len` (`RUNGS_RELAY_TICKET_BYTES`)
    /// bytes, for `local_seat`.
    pub relay_ticket: *const u8,
    pub relay_ticket_len: usize,
    /// Relay: the ticket's link secret.
    pub relay_link_secret: [u8; 16],
    /// Relay: every frame below it already ran on this machine (a restarted
    /// program that kept its game state); 0 for a fresh start.
    pub relay_have_horizon: u32,
    /// Relay: how many ticks behind the relay's clock frames run, beyond the
    /// bundle interval, 1 to 255 (more counts as 255): one-way delay and
    /// jitter up to that much cost no stall. 0: the default,
    /// `RUNGS_RELAY_DEFAULT_JITTER_TICKS` (67 ms at 30 ticks/s).
    pub relay_jitter_ticks: u32,
    /// Peer-to-peer: a player unheard for this long, in ms, has vanished
    /// (its link is lost: `link_event` LOST) and is dropped; 0 for rungs'
    /// default, clamp(8 × smoothed round trip + 250 ms, 2 s, 30 s), or up
    /// to 600000. Shorter: a crash stalls the game less; longer: a network
    /// outage of that length does not split the game.
    pub liveness_timeout_ms: u32,
    /// 0 (the default): rungs drops a player whose machine vanished (link
    /// lost, or restarted) by itself, every survivor agreeing on the same
    /// last turn of it (S4.7). 1: the engine decides, calling
    /// `rungs_lockstep_drop_player` (the others still follow a drop once
    /// they lose that player too).
    pub manual_drops: u32,
}

/// Longest `liveness_timeout_ms`.
const MAX_LIVENESS_TIMEOUT_MS: u32 = 600_000;

/// The key of the link between this machine and `seat` (S8 per-pair keys):
/// game setup gives both machines of a pair the same key and nobody else.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rungs_link_key {
    /// The other seat of the pair.
    pub seat: u8,
    /// Must be 0.
    pub reserved: [u8; 3],
    /// 16 secret bytes, not all zero.
    pub key: [u8; 16],
}

/// What `rungs_lockstep_update` did.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct rungs_lockstep_update_result {
    /// One of `RUNGS_LOCKSTEP_*`.
    pub outcome: rungs_lockstep_outcome,
    /// The frame that ran (`RUNGS_LOCKSTEP_RAN`), else the latest frame run.
    pub frame: u32,
    /// Call `rungs_lockstep_update` again by this time (µs on your clock).
    pub next_us: u64,
    /// Bit `i` set: the next frame waits for seat `i`'s turns.
    pub waiting_for: u32,
}

/// Counters for a diagnostics screen.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct rungs_lockstep_stats {
    /// Frames that had to wait for other players, and the total wait.
    pub stalled_frames: u64,
    pub stall_us: u64,
    /// Turn messages sent.
    pub turn_messages: u64,
    /// Messages from peers that did not decode (never acted on).
    pub malformed_messages: u64,
    /// Desyncs detected.
    pub desyncs: u64,
    /// The clock offset to the master applied now, µs (S9).
    pub clock_offset_us: i64,
    /// Items refused by the authority checks (S4.7): a removal of another
    /// player, a timing event from a non-master.
    pub refused_items: u64,
    /// Messages refused on receipt: turns outside the schedule or the
    /// bounds, relays this machine did not ask for (S4.7, S8).
    pub refused_messages: u64,
    /// Frames that waited for room on a link (S8 backpressure).
    pub backpressure_waits: u64,
}

/// The session, its socket and the engine's callbacks.
pub struct LockstepObject {
    pub(super) driver: LockstepDriver,
    pub(super) callbacks: rungs_lockstep_callbacks,
    /// The relay topology's own callbacks (`rungs_lockstep_set_relay_callbacks`).
    pub(super) relay_callbacks: Option<super::relay::rungs_relay_callbacks>,
    /// `rungs_lockstep_set_protocol_mismatch`'s callback.
    pub(super) protocol_mismatch: Option<MismatchCallback>,
    /// `config->checksum_interval`, so a checksum submitted with checksums
    /// off is refused with a message that says they are off.
    checksum_interval: u32,
}

/// An opaque lockstep game, made by `rungs_lockstep_new`: the guarded
/// game and the status it published last (`snapshot.rs`).
pub struct rungs_lockstep(Guarded<LockstepObject>, Published);

impl rungs_lockstep {
    pub(super) fn new(object: LockstepObject) -> Self {
        let status = Published::new(object.status());
        rungs_lockstep(Guarded::new(object), status)
    }
}

impl Handle for rungs_lockstep {
    type State = LockstepObject;
    fn guarded(&self) -> &Guarded<LockstepObject> {
        &self.0
    }
}

impl PublishesStatus for rungs_lockstep {
    fn published(&self) -> &Published {
        &self.1
    }
}

impl LockstepObject {
    pub(super) fn new(driver: LockstepDriver, config: &rungs_lockstep_config) -> LockstepObject {
        LockstepObject {
            driver,
            callbacks: config.callbacks,
            relay_callbacks: None,
            protocol_mismatch: None,
            checksum_interval: config.checksum_interval,
        }
    }

    /// This machine's own seat, refused by the calls that take another's.
    fn refuse_own_seat(&mut self, seat: u8, why: &str) -> Result<()> {
        if seat == self.session().endpoint().local_seat() {
            return Err(Error::UnknownSeat(seat)
                .detailed(format!(
                    "seat {seat} is this machine's own seat (config->local_seat); {why}"
                ))
                .into());
        }
        Ok(())
    }

    pub(super) fn session(&mut self) -> &mut LockstepSession {
        self.driver.session_mut()
    }

    /// The status `rungs_lockstep_status` shows.
    fn status(&self) -> rungs_timing_status {
        let (status, is_master) = self.driver.session().timing_status();
        status_to_c(&status, is_master)
    }

    /// Hand every pending event to the engine's callbacks.
    fn deliver_events(&mut self) {
        let cb = self.callbacks;
        while let Some(event) = self.session().poll_event() {
            // SAFETY: the engine's function pointers and user pointer, for this use.
            unsafe {
                match event {
                    SessionEvent::Timing(output) => {
                        let timing_callbacks = rungs_timing_callbacks {
                            user: cb.user,
                            timing_changed: cb.timing_changed,
                            frame_rate_changed: cb.frame_rate_changed,
                            player_message: cb.player_message,
                            master_changed: cb.master_changed,
                        };
                        deliver_output(&timing_callbacks, output);
                    }
                    SessionEvent::PlayerRemoved { frame, seat } => {
                        if let Some(f) = cb.player_removed {
                            f(cb.user, frame, seat);
                        }
                    }
                    SessionEvent::Desync { frame, seats } => {
                        if let Some(f) = cb.desync {
                            f(cb.user, frame, seats);
                        }
                    }
                    SessionEvent::LinkLost { seat } => {
                        if let Some(f) = cb.link_event {
                            f(cb.user, seat, RUNGS_LINK_EVENT_LOST);
                        }
                    }
                    SessionEvent::LinkRecovered { seat } => {
                        if let Some(f) = cb.link_event {
                            f(cb.user, seat, RUNGS_LINK_EVENT_RECOVERED);
                        }
                    }
                    SessionEvent::PeerRestarted { seat } => {
                        if let Some(f) = cb.link_event {
                            f(cb.user, seat, RUNGS_LINK_EVENT_RESTARTED);
                        }
                    }
                    SessionEvent::CommandRefused { id, reason } => {
                        super::relay::deliver_refusal(self.relay_callbacks.as_ref(), id, reason);
                    }
                    SessionEvent::ProtocolMismatch {
                        mismatch,
                        link_lost,
                    } => {
                        deliver_mismatch(self.protocol_mismatch.as_ref(), &mismatch, link_lost);
                    }
                }
            }
        }
    }
}

/// The C function `function`'s call on the game behind `ls` (see
/// [`object_call`]).
///
/// # Safety
/// `ls` is NULL or a live game from `rungs_lockstep_new`.
pub(super) unsafe fn lockstep_call(
    function: &'static str,
    ls: *const rungs_lockstep,
    f: impl FnOnce(&mut LockstepObject) -> Result<()>,
) -> rungs_result {
    // SAFETY: forwarded contract; the guard checks NULL.
    unsafe {
        object_call(function, ls, |o| {
            let result = f(o);
            // SAFETY: the guard let this call in, so `ls` is non-NULL and live.
            (*ls).1.publish(o.status());
            result
        })
    }
}

/// # Safety
/// `c.link_keys` is NULL or points to `c.link_key_count` readable entries.
pub(super) unsafe fn lockstep_config(c: &rungs_lockstep_config) -> Result<LockstepConfig> {
    let policy = timing_policy(c.policy, "config->policy")?;
    let topology = match c.topology {
        RUNGS_TOPOLOGY_PEER_TO_PEER => Topology::PeerToPeer,
        // SAFETY: the config's relay pointers by the caller's contract.
        RUNGS_TOPOLOGY_RELAY => Topology::Relay(unsafe { relay_settings(c)? }),
        other => {
            return Err(Error::invalid_value(
                "config->topology",
                other,
                "RUNGS_TOPOLOGY_PEER_TO_PEER (0) or RUNGS_TOPOLOGY_RELAY (1)",
            )
            .into())
        }
    };
    if topology == Topology::PeerToPeer && c.key == [0; 16] {
        return Err(Error::invalid_value(
            "config->key",
            "all zero",
            "the game's 16-byte secret key",
        )
        .into());
    }
    let humans = human_seats(c.seat_count, c.human_seat_mask)?;
    local_seat(c.local_seat, &humans, false)?;
    // SAFETY: `link_key_count` readable entries by contract.
    let entries = unsafe { slice_in(c.link_keys, c.link_key_count, "config->link_keys")? };
    in_range(entries.len(), 0, MAX_SEATS, "config->link_key_count")?;
    let mut link_keys = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        for (j, &byte) in entry.reserved.iter().enumerate() {
            reserved_zero(byte, &format!("config->link_keys[{i}].reserved[{j}]"))?;
        }
        if entry.key == [0; 16] {
            return Err(Error::invalid_value(
                format!("config->link_keys[{i}].key"),
                "all zero",
                format!("the secret key of the link to seat {}", entry.seat),
            )
            .into());
        }
        let other_human = humans.get(usize::from(entry.seat)) == Some(&true);
        if !other_human || entry.seat == c.local_seat {
            return Err(Error::invalid_value(
                format!("config->link_keys[{i}].seat"),
                entry.seat,
                format!(
                    "a human seat other than config->local_seat ({})",
                    c.local_seat
                ),
            )
            .into());
        }
        link_keys.push((entry.seat, SessionKey(entry.key)));
    }
    in_range(
        c.liveness_timeout_ms,
        0,
        MAX_LIVENESS_TIMEOUT_MS,
        "config->liveness_timeout_ms",
    )?;
    let manual_drops = match c.manual_drops {
        0 => false,
        1 => true,
        other => {
            return Err(Error::invalid_value(
                "config->manual_drops",
                other,
                "0 (rungs drops vanished players) or 1 (the engine does)",
            )
            .into())
        }
    };
    Ok(LockstepConfig {
        machine: MachineConfig {
            policy,
            ..MachineConfig::adaptive(c.speed_fps, humans, Some(c.local_seat))
        },
        session_id: c.session_id,
        key: SessionKey(c.key),
        link_keys,
        epoch: if c.epoch == 0 {
            super::transport::wall_clock_epoch()
        } else {
            c.epoch
        },
        link: LinkConfig {
            liveness_timeout_us: (c.liveness_timeout_ms != 0)
                .then(|| u64::from(c.liveness_timeout_ms) * 1000),
            ..LinkConfig::default()
        },
        checksum_interval: c.checksum_interval,
        topology,
        manual_drops,
    })
}

/// The relay fields of `c`, checked.
///
/// # Safety
/// `c.relay_address` is NULL or NUL-terminated; `c.relay_ticket` is NULL or
/// points to `c.relay_ticket_len` readable bytes.
unsafe fn relay_settings(c: &rungs_lockstep_config) -> Result<RelaySettings> {
    require(c.relay_address, "config->relay_address")?;
    // SAFETY: non-NULL, NUL-terminated by contract.
    let relay = unsafe { parse_address(c.relay_address, "config->relay_address")? };
    // SAFETY: `relay_ticket_len` readable bytes by contract.
    let ticket = unsafe { slice_in(c.relay_ticket, c.relay_ticket_len, "config->relay_ticket")? };
    let ticket =
        <[u8; super::relay::RUNGS_RELAY_TICKET_BYTES]>::try_from(ticket).map_err(|_| {
            Error::invalid_value(
                "config->relay_ticket_len",
                c.relay_ticket_len,
                format!(
                    "RUNGS_RELAY_TICKET_BYTES ({})",
                    super::relay::RUNGS_RELAY_TICKET_BYTES
                ),
            )
        })?;
    if c.relay_link_secret == [0; 16] {
        return Err(Error::invalid_value(
            "config->relay_link_secret",
            "all zero",
            "the ticket's 16-byte link secret",
        )
        .into());
    }
    let credentials = Credentials {
        ticket,
        link_secret: LinkSecret(c.relay_link_secret),
    };
    let seat = credentials
        .fields()
        .map_err(|e| {
            Error::invalid_value(
                "config->relay_ticket",
                format!("not a ticket ({e})"),
                "a ticket the lobby issued",
            )
        })?
        .seat;
    if seat != c.local_seat {
        return Err(Error::invalid_value(
            "config->relay_ticket's seat",
            seat,
            format!("config->local_seat ({})", c.local_seat),
        )
        .into());
    }
    Ok(RelaySettings {
        have_horizon: c.relay_have_horizon,
        jitter_ticks: match c.relay_jitter_ticks {
            0 => RUNGS_RELAY_DEFAULT_JITTER_TICKS,
            ticks => ticks,
        },
        ..RelaySettings::new(relay, credentials, crate::net::process_seed())
    })
}

/// Fill `config` with the defaults: `struct_size` set,
/// `RUNGS_POLICY_ADAPTIVE`, `RUNGS_TOPOLOGY_PEER_TO_PEER`, bind
/// `"0.0.0.0:0"` (NULL), the epoch from the wall clock (0), no checksums
/// (0), rungs' liveness timeout (0), drops by rungs (0), a fresh start
/// behind a relay (0) with `RUNGS_RELAY_DEFAULT_JITTER_TICKS`, no link keys,
/// no callbacks. `speed_fps`, `seat_count`, `human_seat_mask` and an all-zero
/// `key` stay for you to set (`rungs_lockstep_new` refuses them).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if config is NULL; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_config_init(
    config: *mut rungs_lockstep_config,
) -> rungs_result {
    call("rungs_lockstep_config_init", || {
        // SAFETY: every field is valid zeroed (integers, NULL pointers, no
        // callbacks); the fields whose default is not 0 are set below.
        let mut defaults: rungs_lockstep_config = unsafe { std::mem::zeroed() };
        defaults.struct_size = std::mem::size_of::<rungs_lockstep_config>() as u32;
        defaults.relay_jitter_ticks = RUNGS_RELAY_DEFAULT_JITTER_TICKS;
        // SAFETY: NULL (refused) or valid for writes by the caller's contract.
        unsafe { write_to(config, "config", defaults) }
    })
}

/// Make a lockstep game on this machine, its socket bound to
/// `bind_address`, for the eve of frame 0 at time `now_us` (your clock, µs).
/// Peer-to-peer, add every other human seat with `rungs_lockstep_add_peer`
/// before the first `rungs_lockstep_update`; in the relay topology there is
/// nothing to add: the session says Hello to the relay and runs frame 0 when
/// the match starts.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if config or out is NULL,
/// config->link_keys is NULL with a non-zero count, or (relay topology)
/// config->relay_address is NULL or config->relay_ticket is NULL with a
/// non-zero length; RUNGS_ERR_INVALID_ARGUMENT if config->struct_size is too
/// small, policy is not a RUNGS_POLICY_*, topology is neither RUNGS_TOPOLOGY_*, key (or a
/// link key; peer-to-peer) is all zero, speed_fps is 0,
/// seat_count/human_seat_mask/local_seat do not make a game with this
/// machine's seat human, a link key names no other human seat, bind_address
/// or relay_address does not parse, relay_ticket_len is not
/// RUNGS_RELAY_TICKET_BYTES, relay_ticket is not a ticket for local_seat,
/// relay_link_secret is all zero, liveness_timeout_ms is over 600000 or
/// manual_drops is neither 0 nor 1; RUNGS_ERR_IO if the socket cannot be
/// bound; RUNGS_ERR_PANIC. A struct_size from before liveness_timeout_ms and
/// manual_drops existed is accepted: both are then 0, their defaults.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_new(
    config: *const rungs_lockstep_config,
    now_us: u64,
    out: *mut *mut rungs_lockstep,
) -> rungs_result {
    call("rungs_lockstep_new", || {
        require(out, "out")?;
        // SAFETY: the reader checks NULL and struct_size before reading the
        // rest; all-zero is a valid config (NULL pointers, no callbacks).
        let since = field_offset!(rungs_lockstep_config, liveness_timeout_ms);
        let config = unsafe { read_grown_config(config, "config", since)? };
        let bind = if config.bind_address.is_null() {
            SocketAddr::from(([0, 0, 0, 0], 0))
        } else {
            // SAFETY: non-NULL, NUL-terminated by contract.
            unsafe { parse_address(config.bind_address, "config->bind_address")? }
        };
        // SAFETY: the config's link_keys pointer by the caller's contract.
        let session = LockstepSession::new(unsafe { &lockstep_config(&config)? }, now_us)?;
        let driver = LockstepDriver::bind(bind, session)?;
        // SAFETY: `out` is NULL (refused) or writable.
        unsafe {
            hand_out(
                out,
                rungs_lockstep::new(LockstepObject::new(driver, &config)),
            )
        }
    })
}

/// Release a game (closes its socket). NULL accepted; refused from inside a callback.
///
/// Returns: RUNGS_OK (also for NULL); RUNGS_ERR_REENTRANT from inside one
/// of its callbacks; RUNGS_ERR_BUSY while another thread is in a call on it
/// (not freed); RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_free(ls: *mut rungs_lockstep) -> rungs_result {
    // SAFETY: NULL or a live object from `_new`.
    unsafe { free_call("rungs_lockstep_free", ls) }
}

/// The UDP port the socket is bound to (the one the OS picked for port 0).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls or out_port is NULL;
/// RUNGS_ERR_IO if the OS cannot say.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_local_port(
    ls: *mut rungs_lockstep,
    out_port: *mut u16,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_local_port", ls, |o| {
            require(out_port, "out_port")?;
            write_out(out_port, o.driver.local_addr()?.port());
            Ok(())
        })
    }
}

/// Bind human `seat` to `address` (`"ip:port"`), before frame 0. Every other
/// human seat needs one; `rungs_lockstep_update` says so if one is missing.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls or address is NULL;
/// RUNGS_ERR_UNKNOWN_SEAT if seat is this machine's, not a human seat, or not
/// below seat_count; RUNGS_ERR_INVALID_ARGUMENT if address does not parse;
/// RUNGS_ERR_STATE if seat already has an address, or in the relay topology (no
/// peers).
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_add_peer(
    ls: *mut rungs_lockstep,
    seat: u8,
    address: *const libc::c_char,
    now_us: u64,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_add_peer", ls, |o| {
            require(address, "address")?;
            let address = parse_address(address, "address")?;
            o.refuse_own_seat(seat, "add the other human seats")?;
            o.session()
                .add_peer(seat, address, now_us)
                .map_err(CallError::from)
        })
    }
}

/// Issue a command (your bytes, at most about 1 KB): it goes out with this
/// machine's next turn and comes back through the `command` callback on
/// every machine, on the same frame. `*out_frame` (may be NULL) receives
/// the frame it is forecast to execute on or after. When this machine's
/// next turn is full (about 30 KB of commands since the last send frame)
/// nothing is queued and RUNGS_ERR_FULL says so: let a frame run first (S8).
/// Behind a relay the relay may still refuse it (the seat's queue full, the
/// match's tick limit): it then never runs, the `order_refused` relay
/// callback names it, and the commands after it run; submit it with
/// `rungs_lockstep_submit_order` to learn its id.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls is NULL, or bytes is NULL
/// with len > 0; RUNGS_ERR_INVALID_ARGUMENT if len is more than one command
/// carries (1,007 bytes with the default link, 512 behind a relay; the message
/// names both numbers); RUNGS_ERR_FULL if the next turn cannot take it;
/// RUNGS_ERR_STATE after rungs_lockstep_leave.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_submit_command(
    ls: *mut rungs_lockstep,
    bytes: *const u8,
    len: usize,
    out_frame: *mut u32,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_submit_command", ls, |o| {
            let command = slice_in(bytes, len, "bytes")?;
            let limit = o.session().max_command_bytes();
            if command.len() > limit {
                return Err(Error::invalid_value(
                    "len",
                    len,
                    format!("at most {limit} bytes, what one command carries in this game"),
                )
                .into());
            }
            let frame = o.session().submit_command(command)?;
            write_optional(out_frame, frame);
            Ok(())
        })
    }
}

/// Behind a relay (RUNGS_TOPOLOGY_RELAY): an order your AI decided for the
/// AI seat `seat` with the state after the last frame run (frame F). Every
/// machine computes the same AI, so the order stays on this machine: it comes
/// back through the `command` callback with that seat on frame
/// `F + 1 + ai_order_delay` (the match setup's, 0 to 8). `*out_frame` (may
/// be NULL) receives that frame.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls is NULL, or bytes is NULL
/// with len > 0; RUNGS_ERR_INVALID_ARGUMENT if seat is not an AI seat of the
/// match or len is over 512 (as a human order); RUNGS_ERR_STATE peer-to-peer
/// (your engine runs its AI itself) or before the relay welcomed this machine;
/// RUNGS_ERR_FULL with 4096 AI orders waiting.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_submit_ai_order(
    ls: *mut rungs_lockstep,
    seat: u8,
    bytes: *const u8,
    len: usize,
    out_frame: *mut u32,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_submit_ai_order", ls, |o| {
            let order = slice_in(bytes, len, "bytes")?;
            let frame = o.session().submit_ai_order(seat, order)?;
            write_optional(out_frame, frame);
            Ok(())
        })
    }
}

/// Your state checksum after `frame` ran; machines compare them and report
/// a mismatch through `desync`. Peer-to-peer `frame` is a multiple of
/// `checksum_interval`; behind a relay the state *before* every
/// interval-th frame is compared, so `frame + 1` is a multiple of it (and
/// `rungs_lockstep_submit_initial_checksum` gives the state before frame 0).
/// `rungs_lockstep_is_checksum_frame` says which frames, either topology.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if checksum_interval is 0 (checksums are off) or
/// frame is not a checksum frame.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_submit_checksum(
    ls: *mut rungs_lockstep,
    frame: u32,
    checksum: u64,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_submit_checksum", ls, |o| {
            if o.checksum_interval == 0 {
                return Err(Error::invalid_value(
                    "config->checksum_interval",
                    0u32,
                    "positive for checksums to be compared (0 turns them off)",
                )
                .into());
            }
            o.session()
                .submit_checksum(frame, checksum)
                .map_err(CallError::from)
        })
    }
}

/// One frame's work took `duration_us` (for the reports, S3).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_add_frame_work_us(
    ls: *mut rungs_lockstep,
    duration_us: u64,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_add_frame_work_us", ls, |o| {
            o.session().measurements().add_frame_work_us(duration_us);
            Ok(())
        })
    }
}

/// Leave the game: your removal is a command like any other; keep calling
/// `rungs_lockstep_update` until it reports `RUNGS_LOCKSTEP_LEFT`. No
/// command can be submitted after this call.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls is NULL; RUNGS_ERR_STATE if
/// this player already left or is leaving.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_leave(ls: *mut rungs_lockstep) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_leave", ls, |o| {
            o.session().leave().map_err(CallError::from)
        })
    }
}

/// Drop `seat`, whose machine no longer answers (after `RUNGS_LINK_EVENT_LOST`
/// or `RUNGS_LINK_EVENT_RESTARTED`): every remaining machine agrees on the
/// last of its commands to execute, even when several machines vanished at
/// once, one after another, or the master is among them (S4.7). rungs does
/// this by itself unless `config.manual_drops` is 1; dropping a seat that is
/// being dropped already changes nothing.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls is NULL;
/// RUNGS_ERR_UNKNOWN_SEAT if seat is this machine's (leave with
/// rungs_lockstep_leave), not a human seat, or already removed; RUNGS_ERR_STATE
/// in the relay topology (the relay drops a seat after its reconnect grace).
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_drop_player(
    ls: *mut rungs_lockstep,
    seat: u8,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_drop_player", ls, |o| {
            o.refuse_own_seat(seat, "to leave the game call rungs_lockstep_leave")?;
            o.session().drop_player(seat).map_err(CallError::from)
        })
    }
}

/// Drive the game at `now_us` (your monotonic clock, µs): read the socket,
/// fire timers, run the next frame if it is due and every needed turn is
/// here (every one of its commands goes to the `command` callback before
/// this returns), send, and report events. `*out` (may be NULL) says what
/// happened and when to call again (`next_us`, never in the past); in
/// between, a loop may sleep in select/poll on `rungs_lockstep_socket`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls is NULL; RUNGS_ERR_STATE
/// before frame 0 if a human seat has no address (call rungs_lockstep_add_peer
/// for every other human seat), or frames were driven out of order; in the
/// relay topology RUNGS_ERR_STATE also when the relay refused this machine for
/// good (the message says why: a bad or expired ticket, the seat left, the
/// match over, "the relay lost this match's turn log" when the relay restarted
/// without it) or its match compares checksums at another interval than
/// `checksum_interval`. An error never leaves a frame half run: either the
/// frame ran and its commands reached the callback, or it did not start.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_update(
    ls: *mut rungs_lockstep,
    now_us: u64,
    out: *mut rungs_lockstep_update_result,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_update", ls, |o| {
            let cb = o.callbacks;
            let wake = o.driver.update(now_us, |frame, command| {
                if let Some(f) = cb.command {
                    // The engine's function and user pointer, for this use.
                    f(
                        cb.user,
                        frame,
                        command.seat,
                        command.bytes.as_ptr(),
                        command.bytes.len(),
                    );
                }
            })?;
            if matches!(wake.advance, Advance::Ran { .. }) {
                super::relay::deliver_ephemeral(o.relay_callbacks.as_ref(), o.driver.session());
            }
            o.deliver_events();
            let outcome = match wake.advance {
                Advance::Ran { .. } => RUNGS_LOCKSTEP_RAN,
                Advance::NotDue { .. } => RUNGS_LOCKSTEP_NOT_DUE,
                Advance::Waiting => RUNGS_LOCKSTEP_WAITING,
                Advance::Left => RUNGS_LOCKSTEP_LEFT,
            };
            write_optional(
                out,
                rungs_lockstep_update_result {
                    outcome,
                    frame: wake.frame.unwrap_or(0),
                    next_us: wake.next_us,
                    waiting_for: wake.waiting_for,
                },
            );
            Ok(())
        })
    }
}

/// The game's OS socket (see `rungs_socket`), so your loop can wait in
/// select/poll/WSAPoll for a datagram or `next_us`, whichever comes first,
/// then call `rungs_lockstep_update`. Only wait on it: reading it would
/// take the game's datagrams. Valid until `rungs_lockstep_free`.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls or out_socket is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_socket(
    ls: *mut rungs_lockstep,
    out_socket: *mut rungs_socket,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_socket", ls, |o| {
            write_to(out_socket, "out_socket", o.driver.socket())
        })
    }
}

/// Timing, target, tier, master and evaluation state (as for a timing machine).
/// Behind a relay: the relay's timing in force at the next frame and its
/// latest announced change as the target; `master_seat` is RUNGS_NO_SEAT
/// (the relay is the master), and the evaluation fields are the relay's
/// business (0).
///
/// It is the copy the game published when its latest call returned, so a
/// UI thread may poll it while the game thread drives the game, and a
/// callback may read it: it never enters the game, and never makes the
/// game thread's calls return RUNGS_ERR_BUSY. The handle must stay alive
/// (not freed) while this runs.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls or out is NULL;
/// RUNGS_ERR_POISONED; RUNGS_ERR_PANIC. Never RUNGS_ERR_BUSY or
/// RUNGS_ERR_REENTRANT.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_status(
    ls: *mut rungs_lockstep,
    out: *mut rungs_timing_status,
) -> rungs_result {
    // SAFETY: NULL or live by contract.
    unsafe { read_status("rungs_lockstep_status", ls, out) }
}

/// Point the callbacks' `user` (the first argument of every callback in
/// `config->callbacks`, fixed at `rungs_lockstep_new`) at `user` from now
/// on: e.g. at a struct that holds this handle, so a callback can reach it
/// (a callback may read `rungs_lockstep_status`; other calls on the same
/// game from inside its callbacks return RUNGS_ERR_REENTRANT). The relay
/// callbacks keep their own `user` (`rungs_lockstep_set_relay_callbacks`).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_set_user(
    ls: *mut rungs_lockstep,
    user: *mut c_void,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_set_user", ls, |o| {
            o.callbacks.user = user;
            Ok(())
        })
    }
}

/// Counters for a diagnostics screen.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls or out is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_read_stats(
    ls: *mut rungs_lockstep,
    out: *mut rungs_lockstep_stats,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_read_stats", ls, |o| {
            let session = o.session();
            let stats = session.stats();
            write_to(
                out,
                "out",
                rungs_lockstep_stats {
                    stalled_frames: stats.stalled_frames,
                    stall_us: stats.stall_us,
                    turn_messages: stats.turn_messages,
                    malformed_messages: stats.malformed_messages,
                    desyncs: stats.desyncs,
                    clock_offset_us: session.clock_offset_us(),
                    refused_items: stats.refused_items,
                    refused_messages: stats.refused_messages,
                    backpressure_waits: stats.backpressure_waits,
                },
            )
        })
    }
}
