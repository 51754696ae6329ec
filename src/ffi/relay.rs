//! The relay's C API (S10), thin wrappers over [`crate::relay`]:
//!
//! * tickets: a lobby written in C issues a ticket per seat with the secret
//!   it shares with its relays, and hands the player the ticket, its link
//!   secret and the relay's address; a player reads the text form
//!   `rungs-relay ticket` prints (`<ticket hex>:<link secret hex>`);
//! * the order kinds, their refusals and the relay topology's callbacks,
//!   which `rungs_lockstep` delivers (its relay-only calls are in
//!   `lockstep_relay.rs`);
//! * a LAN host: the relay inside the host player's game
//!   (`rungs_relay_host_*`).

use std::ffi::CStr;
use std::net::SocketAddr;

use libc::c_void;

use super::args::{
    in_range, read_config, require, reserved_zero, slice_in, slice_out, write_optional, write_out,
    write_to,
};
use super::guard::{call, free_call, hand_out, object_call, Guarded, Handle};
use super::result::{rungs_result, CallError};
use super::transport::parse_address;
use super::types::rungs_policy;
use super::types::{human_seats, rungs_command_fn, timing_policy};
use crate::error::Error;
use crate::net::{HostConfig, RelayHost};
use crate::relay::ticket::{issue, Credentials, LobbySecret, TicketFields};
use crate::relay::MatchSetup;
use crate::session::LockstepSession;
use crate::wire::relay::{RefusalReason, SeatPresence, TICKET_BYTES};

/// Bytes of a relay ticket.
pub const RUNGS_RELAY_TICKET_BYTES: usize = 42;
/// Bytes of a lobby secret and of a ticket's link secret.
pub const RUNGS_RELAY_SECRET_BYTES: usize = 16;

// Literals for cbindgen; they must agree with the Rust API.
const _: () = assert!(RUNGS_RELAY_TICKET_BYTES == TICKET_BYTES);

/// Write a ticket and its link secret to the caller's buffers.
///
/// # Safety
/// As for the exported functions: `ticket_out` holds `ticket_cap` bytes,
/// `link_secret_out` 16, `ticket_len` one `size_t`, all checked non-NULL.
unsafe fn write_credentials(
    credentials: &Credentials,
    ticket_out: *mut u8,
    ticket_cap: usize,
    ticket_len: *mut usize,
    link_secret_out: *mut u8,
) -> super::result::Result<()> {
    require(ticket_out, "ticket_out")?;
    require(ticket_len, "ticket_len")?;
    require(link_secret_out, "link_secret_out")?;
    if ticket_cap < TICKET_BYTES {
        return Err(Error::BufferTooSmall {
            needed: TICKET_BYTES,
        }
        .into());
    }
    // SAFETY: non-NULL (checked), sizes by contract.
    unsafe {
        slice_out(ticket_out, TICKET_BYTES, "ticket_out")?.copy_from_slice(&credentials.ticket);
        slice_out(link_secret_out, 16, "link_secret_out")?
            .copy_from_slice(&credentials.link_secret.0);
        write_out(ticket_len, TICKET_BYTES);
    }
    Ok(())
}

/// Issue a ticket admitting `seat` (0–15) to the match `match_id` until the
/// Unix time `expires_unix_s` (seconds), as a lobby does: `lobby_secret`
/// (16 bytes) is the secret the lobby shares with the relay, `nonce` is
/// unique per ticket (the lobby's choice). Writes the ticket
/// (`RUNGS_RELAY_TICKET_BYTES`) to `ticket_out` (`ticket_cap` bytes) and its
/// length to `*ticket_len`, and the ticket's link secret (16 bytes) to
/// `link_secret_out`. Hand the player all three with the relay's address;
/// they go into `rungs_lockstep_config` (relay topology). The link secret
/// must reach only that player.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if lobby_secret, ticket_out,
/// ticket_len or link_secret_out is NULL; RUNGS_ERR_INVALID_ARGUMENT if
/// seat is above 15 or lobby_secret is all zero; RUNGS_ERR_BUFFER_TOO_SMALL
/// if ticket_cap is below RUNGS_RELAY_TICKET_BYTES; RUNGS_ERR_PANIC.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn rungs_relay_ticket_issue(
    lobby_secret: *const u8,
    match_id: u64,
    seat: u8,
    expires_unix_s: u64,
    nonce: u64,
    ticket_out: *mut u8,
    ticket_cap: usize,
    ticket_len: *mut usize,
    link_secret_out: *mut u8,
) -> rungs_result {
    call("rungs_relay_ticket_issue", || {
        require(lobby_secret, "lobby_secret")?;
        // SAFETY: non-NULL (checked), 16 bytes by contract.
        let secret = unsafe { slice_in(lobby_secret, 16, "lobby_secret")? };
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(secret);
        let secret = LobbySecret::new(bytes).map_err(|_| {
            Error::invalid_value("lobby_secret", "all zero", "the lobby's secret key")
        })?;
        in_range(seat, 0, 15, "seat")?;
        let credentials = issue(
            &secret,
            &TicketFields {
                match_id,
                seat,
                expires_unix_s,
                nonce,
            },
        )?;
        // SAFETY: the caller's buffers, checked inside.
        unsafe {
            write_credentials(
                &credentials,
                ticket_out,
                ticket_cap,
                ticket_len,
                link_secret_out,
            )
        }
    })
}

/// Read credentials in the text form `rungs-relay ticket` prints,
/// `<84 hex digits of ticket>:<32 hex digits of link secret>` (surrounding
/// white space ignored), into the ticket (`ticket_out`, `ticket_cap` bytes,
/// its length in `*ticket_len`) and the link secret (`link_secret_out`, 16
/// bytes); `*out_seat` (may be NULL) receives the seat the ticket admits,
/// the `local_seat` of `rungs_lockstep_config`. The ticket is not checked
/// here (only the relay holds the secret that can).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if text, ticket_out,
/// ticket_len or link_secret_out is NULL; RUNGS_ERR_INVALID_ARGUMENT if
/// text is not in that form; RUNGS_ERR_BUFFER_TOO_SMALL if ticket_cap is
/// below RUNGS_RELAY_TICKET_BYTES; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_relay_credentials_parse(
    text: *const libc::c_char,
    ticket_out: *mut u8,
    ticket_cap: usize,
    ticket_len: *mut usize,
    link_secret_out: *mut u8,
    out_seat: *mut u8,
) -> rungs_result {
    call("rungs_relay_credentials_parse", || {
        require(text, "text")?;
        // SAFETY: non-NULL (checked), NUL-terminated by contract.
        let text = unsafe { CStr::from_ptr(text) };
        let text = text.to_str().map_err(|_| {
            Error::invalid_value("text", "not UTF-8", "<ticket hex>:<link secret hex>")
        })?;
        let not_credentials = |e: Error| {
            Error::invalid_value(
                "text",
                format!("not credentials ({e})"),
                "<84 hex digits>:<32 hex digits>",
            )
        };
        let credentials = Credentials::from_text(text).map_err(not_credentials)?;
        let seat = credentials.fields().map_err(not_credentials)?.seat;
        // SAFETY: the caller's buffers, checked inside; `out_seat` NULL or writable.
        unsafe {
            write_credentials(
                &credentials,
                ticket_out,
                ticket_cap,
                ticket_len,
                link_secret_out,
            )?;
            write_optional(out_seat, seat);
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------
// The relay topology's own calls on `rungs_lockstep`.

/// Why the relay refused an order, one of `RUNGS_ORDER_REFUSED_*`.
pub type rungs_order_refusal = u8;

/// `order_refused` reason: the seat's orders already reach the match's
/// queue limit past the relay's horizon.
pub const RUNGS_ORDER_REFUSED_QUEUE_FULL: rungs_order_refusal = 1;
/// `order_refused` reason: the match ends (its tick limit) before a tick
/// could take the order.
pub const RUNGS_ORDER_REFUSED_TICK_LIMIT: rungs_order_refusal = 2;
/// `order_refused` reason: this player's quit is already sequenced.
pub const RUNGS_ORDER_REFUSED_LEAVING: rungs_order_refusal = 3;

const _: () = assert!(RUNGS_ORDER_REFUSED_QUEUE_FULL == RefusalReason::QueueFull as u8);
const _: () = assert!(RUNGS_ORDER_REFUSED_TICK_LIMIT == RefusalReason::TickLimit as u8);
const _: () = assert!(RUNGS_ORDER_REFUSED_LEAVING == RefusalReason::Leaving as u8);

/// What an order is, one of `RUNGS_ORDER_COMMAND`, `RUNGS_ORDER_QUIT`,
/// `RUNGS_ORDER_EPHEMERAL`.
pub type rungs_order_kind = u8;

/// `rungs_lockstep_submit_order` kind: a command (as
/// `rungs_lockstep_submit_command`).
pub const RUNGS_ORDER_COMMAND: rungs_order_kind = 0;
/// `rungs_lockstep_submit_order` kind: this player's quit as a game order;
/// it runs on every machine on the frame this seat is removed.
pub const RUNGS_ORDER_QUIT: rungs_order_kind = 1;
/// `rungs_lockstep_submit_order` kind (relay topology only): an ephemeral
/// order (voice, a ping on the map): not game state, sent once, run only
/// on the machines that are live at its frame (`ephemeral` callback).
pub const RUNGS_ORDER_EPHEMERAL: rungs_order_kind = 2;

/// The relay refused the order `id` (`rungs_lockstep_submit_order`'s) for
/// `reason` (`RUNGS_ORDER_REFUSED_*`): it never runs; the orders after it
/// go on. A refused quit leaves the player in the game.
pub type rungs_order_refused_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, id: u64, reason: rungs_order_refusal)>;

/// The relay topology's callbacks, each optional (NULL), run inside
/// `rungs_lockstep_update` on the calling thread like the others.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rungs_relay_callbacks {
    /// `sizeof(rungs_relay_callbacks)`.
    pub struct_size: u32,
    pub user: *mut c_void,
    pub order_refused: rungs_order_refused_fn,
    /// An ephemeral order that came with `frame` (just run), from `seat`:
    /// not game state (a machine catching up never sees it).
    pub ephemeral: rungs_command_fn,
}

/// Tell the engine about a refused order.
pub(super) fn deliver_refusal(
    callbacks: Option<&rungs_relay_callbacks>,
    id: u64,
    reason: RefusalReason,
) {
    if let Some(f) = callbacks.and_then(|c| c.order_refused.map(|f| (f, c.user))) {
        // SAFETY: the engine's function and user pointer, for this use.
        unsafe { (f.0)(f.1, id, reason as u8) };
    }
}

/// Hand the frame's ephemeral orders to the engine.
pub(super) fn deliver_ephemeral(
    callbacks: Option<&rungs_relay_callbacks>,
    session: &LockstepSession,
) {
    let Some((f, user)) = callbacks.and_then(|c| c.ephemeral.map(|f| (f, c.user))) else {
        return;
    };
    for order in session.ephemeral() {
        // SAFETY: the engine's function and user pointer; the bytes live
        // for the call.
        unsafe {
            f(
                user,
                order.tag,
                order.seat,
                order.bytes.as_ptr(),
                order.bytes.len(),
            )
        };
    }
}

// ---------------------------------------------------------------------------
// A LAN host: the relay inside the host player's game.

/// Bytes of the text form of credentials, `<84 hex>:<32 hex>` and its NUL.
pub const RUNGS_RELAY_CREDENTIALS_TEXT_BYTES: usize = 118;

/// `tick_rate_millihz` of a relay host when the config says 0: 30 frames a second.
pub const RUNGS_RELAY_HOST_DEFAULT_TICK_RATE_MILLIHZ: u32 = 30_000;
/// `load_wait_seconds` and `grace_seconds` of a relay host when the config says 0.
pub const RUNGS_RELAY_HOST_DEFAULT_SECONDS: u32 = 60;

/// How to host a match in this process (`rungs_relay_host_new`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rungs_relay_host_config {
    /// `sizeof(rungs_relay_host_config)`.
    pub struct_size: u32,
    /// Seats, 1–16.
    pub seat_count: u8,
    /// `RUNGS_POLICY_ADAPTIVE` (0) or `RUNGS_POLICY_TRACKING` (1): the rule
    /// that sets each player's jitter buffer.
    pub policy: rungs_policy,
    /// AI orders run this many frames after their decision, 0–8.
    pub ai_order_delay: u8,
    /// Must be 0.
    pub reserved: u8,
    /// The match's id (the tickets name it).
    pub match_id: u64,
    /// Bit `i` set: seat `i` is a human player (with a machine).
    pub human_seat_mask: u32,
    /// Frames per 1000 s; 0: `RUNGS_RELAY_HOST_DEFAULT_TICK_RATE_MILLIHZ`
    /// (30 frames a second).
    pub tick_rate_millihz: u32,
    /// Frames between state checksums (0–65535); 0 for none.
    pub checksum_interval: u32,
    /// Start even if some players have not joined after this long, s; 0:
    /// `RUNGS_RELAY_HOST_DEFAULT_SECONDS` (60).
    pub load_wait_seconds: u32,
    /// Drop a player whose link is lost this long, s; 0:
    /// `RUNGS_RELAY_HOST_DEFAULT_SECONDS` (60).
    pub grace_seconds: u32,
    /// Must be 0.
    pub reserved2: u32,
    /// Where the relay listens, `"ip:port"`; NULL for `"0.0.0.0:0"` (every
    /// interface, a port the OS picks: `rungs_relay_host_port`).
    pub listen_address: *const libc::c_char,
    /// The secret the tickets are made with; all zero: a fresh one.
    pub lobby_secret: [u8; 16],
}

/// What `rungs_relay_host_read_status` reports.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct rungs_relay_host_status {
    /// 1 once the match clock started.
    pub started: u8,
    /// 1 once the match is over.
    pub over: u8,
    /// Seats of the match.
    pub seat_count: u8,
    pub reserved: u8,
    /// The relay's frame now.
    pub tick: u32,
    /// Every frame below it has been sent to the players.
    pub horizon: u32,
    /// Per seat: `RUNGS_SEAT_AI` (0), `RUNGS_SEAT_LOADING`,
    /// `RUNGS_SEAT_CONNECTED`, `RUNGS_SEAT_RECONNECTING`, `RUNGS_SEAT_LEFT`.
    pub presence: [rungs_seat_presence; 16],
}

/// A seat's presence in a relay match, one of `RUNGS_SEAT_*`.
pub type rungs_seat_presence = u8;

/// Presence: an AI seat (or none).
pub const RUNGS_SEAT_AI: rungs_seat_presence = 0;
/// Presence: a human who has not joined yet.
pub const RUNGS_SEAT_LOADING: rungs_seat_presence = 1;
/// Presence: a human with a live link to the relay.
pub const RUNGS_SEAT_CONNECTED: rungs_seat_presence = 2;
/// Presence: a human whose link was lost, within the reconnect grace.
pub const RUNGS_SEAT_RECONNECTING: rungs_seat_presence = 3;
/// Presence: a human who quit or was dropped.
pub const RUNGS_SEAT_LEFT: rungs_seat_presence = 4;

const _: () = assert!(RUNGS_SEAT_LEFT == SeatPresence::Left as u8);
const _: () = assert!(RUNGS_SEAT_RECONNECTING == SeatPresence::Reconnecting as u8);

/// An opaque LAN host, made by `rungs_relay_host_new`.
pub struct rungs_relay_host(Guarded<RelayHost>);

impl Handle for rungs_relay_host {
    type State = RelayHost;
    fn guarded(&self) -> &Guarded<RelayHost> {
        &self.0
    }
}

/// Fill `config` with the defaults: `struct_size` set,
/// `RUNGS_POLICY_ADAPTIVE`, AI orders on the next frame (0), 30 frames a
/// second (`RUNGS_RELAY_HOST_DEFAULT_TICK_RATE_MILLIHZ`), no checksums, 60 s
/// to load and 60 s of reconnect grace (`RUNGS_RELAY_HOST_DEFAULT_SECONDS`),
/// every interface on a port the OS picks (NULL), a fresh lobby secret
/// (all zero). `seat_count`, `human_seat_mask` and `match_id` are your
/// match's.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if config is NULL; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_relay_host_config_init(
    config: *mut rungs_relay_host_config,
) -> rungs_result {
    call("rungs_relay_host_config_init", || {
        // SAFETY: every field is valid zeroed (integers, NULL pointers, no
        // callbacks); the fields whose default is not 0 are set below.
        let mut defaults: rungs_relay_host_config = unsafe { std::mem::zeroed() };
        defaults.struct_size = std::mem::size_of::<rungs_relay_host_config>() as u32;
        defaults.tick_rate_millihz = RUNGS_RELAY_HOST_DEFAULT_TICK_RATE_MILLIHZ;
        defaults.load_wait_seconds = RUNGS_RELAY_HOST_DEFAULT_SECONDS;
        defaults.grace_seconds = RUNGS_RELAY_HOST_DEFAULT_SECONDS;
        // SAFETY: NULL (refused) or valid for writes by the caller's contract.
        unsafe { write_to(config, "config", defaults) }
    })
}

/// Host a match in this process: bind the relay's socket and start its
/// worker thread. Then hand every player (this one included) its ticket
/// (`rungs_relay_host_ticket` or `rungs_relay_host_credentials`) with this
/// machine's address and `rungs_relay_host_port`; each plays through a
/// `rungs_lockstep` in the relay topology — this player's pointed at
/// 127.0.0.1. The relay keeps nothing on disk: the match lives as long as
/// this host. Free it after the match (closes the socket, stops the thread).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if config or out is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if config->struct_size is too small,
/// seat_count/human_seat_mask do not make a match with a human seat, policy
/// is not a RUNGS_POLICY_*, ai_order_delay is over 8, checksum_interval is
/// over 65535, reserved or reserved2 is not 0, or listen_address does not parse;
/// RUNGS_ERR_IO if the socket cannot be bound; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_relay_host_new(
    config: *const rungs_relay_host_config,
    out: *mut *mut rungs_relay_host,
) -> rungs_result {
    call("rungs_relay_host_new", || {
        require(out, "out")?;
        // SAFETY: read_config checks NULL and struct_size before the rest.
        let c = unsafe { read_config(config, "config")? };
        reserved_zero(c.reserved, "config->reserved")?;
        if c.reserved2 != 0 {
            return Err(Error::invalid_value("config->reserved2", c.reserved2, "0").into());
        }
        let humans = human_seats(c.seat_count, c.human_seat_mask)?;
        let human_mask = humans
            .iter()
            .enumerate()
            .filter(|(_, h)| **h)
            .fold(0u16, |m, (s, _)| m | 1 << s);
        let listen = if c.listen_address.is_null() {
            SocketAddr::from(([0, 0, 0, 0], 0))
        } else {
            // SAFETY: non-NULL, NUL-terminated by contract.
            unsafe { parse_address(c.listen_address, "config->listen_address")? }
        };
        let seconds = |value: u32| {
            let value = if value == 0 {
                RUNGS_RELAY_HOST_DEFAULT_SECONDS
            } else {
                value
            };
            u64::from(value) * 1_000_000
        };
        let setup = MatchSetup {
            tick_rate_millihz: if c.tick_rate_millihz == 0 {
                RUNGS_RELAY_HOST_DEFAULT_TICK_RATE_MILLIHZ
            } else {
                c.tick_rate_millihz
            },
            timing_policy: Some(timing_policy(c.policy, "config->policy")?),
            checksum_interval: in_range(
                c.checksum_interval,
                0,
                65_535,
                "config->checksum_interval",
            )? as u16,
            ai_order_delay: in_range(c.ai_order_delay, 0, 8, "config->ai_order_delay")?,
            start_barrier_us: seconds(c.load_wait_seconds),
            reconnect_grace_us: seconds(c.grace_seconds),
            ..MatchSetup::new(c.match_id, c.seat_count, human_mask)
        };
        let lobby_secret = if c.lobby_secret == [0; 16] {
            None
        } else {
            Some(LobbySecret::new(c.lobby_secret)?)
        };
        let host = RelayHost::start(HostConfig {
            listen,
            setup,
            lobby_secret,
        })?;
        // SAFETY: `out` is NULL (refused) or writable.
        unsafe { hand_out(out, rungs_relay_host(Guarded::new(host))) }
    })
}

/// Stop hosting: the relay's thread stops and its socket closes (players'
/// links time out; end the match first so they hear it is over). NULL
/// accepted.
///
/// Returns: RUNGS_OK (also for NULL); RUNGS_ERR_BUSY while another thread
/// is in a call on it (not freed); RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_relay_host_free(host: *mut rungs_relay_host) -> rungs_result {
    // SAFETY: NULL or a live object from `_new`.
    unsafe { free_call("rungs_relay_host_free", host) }
}

/// The UDP port the host's relay listens on (the one the OS picked for 0).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if host or out_port is NULL;
/// RUNGS_ERR_POISONED, RUNGS_ERR_BUSY, RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_relay_host_port(
    host: *mut rungs_relay_host,
    out_port: *mut u16,
) -> rungs_result {
    unsafe {
        object_call("rungs_relay_host_port", host, |h| {
            write_to(out_port, "out_port", h.local_addr().port())
        })
    }
}

/// A ticket for the human seat `seat` of the hosted match (valid for a
/// day) into `ticket_out` (`ticket_cap` bytes, its length in `*ticket_len`)
/// and its link secret (16 bytes) into `link_secret_out`: what
/// `rungs_lockstep_config`'s relay fields take. Hand it to that player only.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if host, ticket_out,
/// ticket_len or link_secret_out is NULL; RUNGS_ERR_INVALID_ARGUMENT if
/// seat is not a human seat of the match; RUNGS_ERR_BUFFER_TOO_SMALL if
/// ticket_cap is below RUNGS_RELAY_TICKET_BYTES; RUNGS_ERR_STATE once the
/// match is over and gone; RUNGS_ERR_POISONED, RUNGS_ERR_BUSY,
/// RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_relay_host_ticket(
    host: *mut rungs_relay_host,
    seat: u8,
    ticket_out: *mut u8,
    ticket_cap: usize,
    ticket_len: *mut usize,
    link_secret_out: *mut u8,
) -> rungs_result {
    unsafe {
        object_call("rungs_relay_host_ticket", host, |h| {
            let credentials = h.credentials(seat)?;
            write_credentials(
                &credentials,
                ticket_out,
                ticket_cap,
                ticket_len,
                link_secret_out,
            )
        })
    }
}

/// The same credentials as text, `<ticket hex>:<link secret hex>` and a NUL,
/// into `buf` (`cap` bytes, at least RUNGS_RELAY_CREDENTIALS_TEXT_BYTES);
/// `*out_len` (may be NULL) receives its length without the NUL. What
/// `rungs_relay_credentials_parse` and `rungs-relay ticket` read and write:
/// a host can hand it over any text channel of its game.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if host or buf is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if seat is not a human seat of the match;
/// RUNGS_ERR_BUFFER_TOO_SMALL if cap is below
/// RUNGS_RELAY_CREDENTIALS_TEXT_BYTES; RUNGS_ERR_STATE once the match is
/// over and gone; RUNGS_ERR_POISONED, RUNGS_ERR_BUSY, RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_relay_host_credentials(
    host: *mut rungs_relay_host,
    seat: u8,
    buf: *mut libc::c_char,
    cap: usize,
    out_len: *mut usize,
) -> rungs_result {
    unsafe {
        object_call("rungs_relay_host_credentials", host, |h| {
            require(buf, "buf")?;
            let text = h.credentials(seat)?.to_text();
            if cap < text.len() + 1 {
                return Err(Error::BufferTooSmall {
                    needed: text.len() + 1,
                }
                .into());
            }
            // SAFETY: non-NULL, `cap` writable bytes by contract.
            let out = slice_out(buf.cast::<u8>(), text.len() + 1, "buf")?;
            out[..text.len()].copy_from_slice(text.as_bytes());
            out[text.len()] = 0;
            write_optional(out_len, text.len());
            Ok(())
        })
    }
}

/// The hosted match now: started, over, the relay's frame and horizon, and
/// each seat's presence.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if host or out is NULL;
/// RUNGS_ERR_STATE once the match is over and gone, or if the relay's
/// thread stopped on a panic; RUNGS_ERR_POISONED, RUNGS_ERR_BUSY,
/// RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_relay_host_read_status(
    host: *mut rungs_relay_host,
    out: *mut rungs_relay_host_status,
) -> rungs_result {
    unsafe {
        object_call("rungs_relay_host_read_status", host, |h| {
            require(out, "out")?;
            let s = h.status()?;
            let mut presence = [0u8; 16];
            for (p, state) in presence.iter_mut().zip(s.presence) {
                *p = state as u8;
            }
            write_to(
                out,
                "out",
                rungs_relay_host_status {
                    started: u8::from(s.started),
                    over: u8::from(s.over),
                    seat_count: s.seat_count,
                    reserved: 0,
                    tick: s.tick,
                    horizon: s.horizon,
                    presence,
                },
            )
        })
    }
}

/// End the hosted match now: every player hears it is over (their
/// `rungs_lockstep_update` says LEFT once they ran its last frame).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if host is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT once the match is gone; RUNGS_ERR_POISONED,
/// RUNGS_ERR_BUSY, RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_relay_host_end(host: *mut rungs_relay_host) -> rungs_result {
    unsafe {
        object_call("rungs_relay_host_end", host, |h| {
            h.end().map_err(CallError::from)
        })
    }
}
