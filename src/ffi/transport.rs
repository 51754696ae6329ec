//! C API of the UDP transport (S8): `rungs_endpoint`, one per machine, owning
//! one UDP socket and a link to every peer seat.
//!
//! Time: every call that needs the time takes `now_us`, microseconds on any
//! monotonic clock of the engine's (the same clock on every call). While a
//! worker thread runs (`rungs_endpoint_start_worker`), the worker's own
//! clock, started at the last `now_us` the engine passed, is used instead and
//! `now_us` arguments are ignored.

use std::collections::VecDeque;
use std::ffi::{c_char, c_void, CStr};
use std::net::SocketAddr;
use std::time::Duration;

use super::args::{
    in_range, read_config, require, require_sized_out, reserved_zero, slice_in, slice_out,
    write_out, write_to,
};
use super::guard::{call, enter, free_call, hand_out, object_call, Guarded, Handle};
use super::result::rungs_result;
use super::result::{CallError, Result};
use super::types::{rungs_link_event, rungs_link_event_fn};
use super::version::{deliver_mismatch, rungs_protocol_mismatch_fn, MismatchCallback};
use crate::error::Error;
use crate::link::MAX_IN_FLIGHT_LIMIT;
use crate::link::{
    DropReason, Endpoint, EndpointConfig, LinkConfig, LinkEvent, LinkStats, ProtocolMismatch,
};
use crate::net::{MonotonicClock, UdpDriver, Worker, WorkerStatus};
use crate::wire::{SessionKey, MAX_MESSAGE_BYTES, MAX_PACKET_BYTES};

/// Largest message payload `rungs_endpoint_send` accepts and
/// `rungs_endpoint_recv` can return: a buffer this large always suffices.
pub const RUNGS_MAX_MESSAGE_BYTES: u32 = 1024;
/// Largest datagram the transport sends.
pub const RUNGS_MAX_PACKET_BYTES: u32 = 1200;
/// `keepalive_interval_ms` value that turns keep-alive pings off.
pub const RUNGS_KEEPALIVE_OFF: u32 = 0xFFFF_FFFF;
/// Round-trip fields of `rungs_link_stats` before the first clean sample.
pub const RUNGS_RTT_NONE: u32 = 0xFFFF_FFFF;
/// An OS socket handle, for waiting only: on Unix the file descriptor (cast
/// it to `int`), on Windows the `SOCKET` (cast it to `SOCKET`). 64 bits wide
/// on every platform, so the header is the same for 32- and 64-bit builds.
pub type rungs_socket = u64;

/// `last_heard_ms_ago` of a link that never heard its peer.
pub const RUNGS_NEVER_HEARD: u32 = 0xFFFF_FFFF;

/// No event (`rungs_endpoint_poll_event` found nothing).
pub const RUNGS_LINK_EVENT_NONE: rungs_link_event = 0;
/// Nothing valid heard from the peer for the liveness timeout. The link keeps
/// trying; the engine decides whether to remove the player (S8).
pub const RUNGS_LINK_EVENT_LOST: rungs_link_event = 1;
/// A valid packet arrived from a peer that was reported lost.
pub const RUNGS_LINK_EVENT_RECOVERED: rungs_link_event = 2;
/// Link event: the peer restarted (a new connection epoch): the link was
/// reset and what either side had in flight is gone (S8).
pub const RUNGS_LINK_EVENT_RESTARTED: rungs_link_event = 3;

/// `rungs_link_stats.flags`: at least one clean round-trip sample (S8).
pub const RUNGS_LINK_CLEAN_MEASUREMENT: u32 = 1;
/// `rungs_link_stats.flags`: unacknowledged messages older than the RTO (S8).
pub const RUNGS_LINK_RETRANSMITTING: u32 = 2;
/// `rungs_link_stats.flags`: reported lost and not heard since.
pub const RUNGS_LINK_LOST: u32 = 4;

/// Why a datagram was dropped, one of `RUNGS_DROP_*` (below
/// `RUNGS_DROP_REASON_COUNT`).
pub type rungs_drop_reason = u32;

/// Drop reason: shorter than the smallest packet.
pub const RUNGS_DROP_TOO_SHORT: rungs_drop_reason = 0;
/// Drop reason: longer than the largest packet.
pub const RUNGS_DROP_TOO_LONG: rungs_drop_reason = 1;
/// Drop reason: not a rungs packet.
pub const RUNGS_DROP_BAD_MAGIC: rungs_drop_reason = 2;
/// Drop reason: another protocol version.
pub const RUNGS_DROP_BAD_VERSION: rungs_drop_reason = 3;
/// Drop reason: another session's packet.
pub const RUNGS_DROP_WRONG_SESSION: rungs_drop_reason = 4;
/// Drop reason: the sender seat is not a peer.
pub const RUNGS_DROP_UNKNOWN_SENDER: rungs_drop_reason = 5;
/// Drop reason: source address not the one bound to the sender's seat.
pub const RUNGS_DROP_SPOOFED_ADDRESS: rungs_drop_reason = 6;
/// Drop reason: authentication tag mismatch (wrong key, forged, corrupted).
pub const RUNGS_DROP_BAD_TAG: rungs_drop_reason = 7;
/// Drop reason: packet number seen before (duplicate or replay).
pub const RUNGS_DROP_REPLAYED: rungs_drop_reason = 8;
/// Drop reason: packet too old, or message number too far ahead.
pub const RUNGS_DROP_OUTSIDE_WINDOW: rungs_drop_reason = 9;
/// Drop reason: bad flags, message framing, or acks of things never sent.
pub const RUNGS_DROP_MALFORMED: rungs_drop_reason = 10;
/// Drop reason: receiver holds too many undelivered messages (flow control;
/// the peer resends later).
pub const RUNGS_DROP_RECEIVER_FULL: rungs_drop_reason = 11;
/// Drop reason: a packet of the peer's earlier connection, or addressed to
/// this machine's earlier connection (S8 restarts).
pub const RUNGS_DROP_STALE_EPOCH: rungs_drop_reason = 12;
/// Number of drop reasons (length of `rungs_link_stats.dropped`).
pub const RUNGS_DROP_REASON_COUNT: u32 = 13;

// Literals above, so the header gets numbers; kept equal to the Rust values.
const _: () = assert!(DropReason::ALL.len() == RUNGS_DROP_REASON_COUNT as usize);
const _: () = assert!(RUNGS_MAX_MESSAGE_BYTES as usize == MAX_MESSAGE_BYTES);
const _: () = assert!(RUNGS_MAX_PACKET_BYTES as usize == MAX_PACKET_BYTES);

/// Settings of a transport endpoint. Fill with `rungs_endpoint_config_init`,
/// then set the session, key, seat and address.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rungs_endpoint_config {
    /// `sizeof(rungs_endpoint_config)`, so the struct can grow later.
    pub struct_size: u32,
    /// The game's session id; packets of another session are dropped.
    pub session_id: u32,
    /// The session's 128-bit key, the same on every machine of the game
    /// (the game's host draws it and hands it out with the game setup).
    pub key: [u8; 16],
    /// This machine's seat.
    pub local_seat: u8,
    /// Must be zero.
    pub reserved: [u8; 3],
    /// Send a keep-alive after this long without an ack-eliciting packet:
    /// 0 for the default (250 ms), `RUNGS_KEEPALIVE_OFF` for none.
    pub keepalive_interval_ms: u32,
    /// Report a link lost after this long with nothing heard: 0 for the
    /// adaptive default `clamp(8·SRTT + 250 ms, 2 s, 30 s)`.
    pub liveness_timeout_ms: u32,
    /// Most unacknowledged messages per link, 1–8192; 0 for the default (1024).
    pub max_in_flight: u32,
    /// Local address to bind, NUL-terminated text: `"0.0.0.0:0"`,
    /// `"127.0.0.1:7000"`, `"[::]:7000"` (IPv6 and IPv4, dual-stack). NULL
    /// binds `"0.0.0.0:0"` (any IPv4 interface, a free port).
    pub bind_address: *const c_char,
    /// Link event callback, or NULL to collect events with
    /// `rungs_endpoint_poll_event`. Runs on the thread that called
    /// `rungs_endpoint_poll`; calling back into the same endpoint from it
    /// returns `RUNGS_ERR_REENTRANT`.
    pub on_link_event: rungs_link_event_fn,
    /// Passed to `on_link_event` unchanged.
    pub user: *mut c_void,
}

/// One delivered message's envelope, filled by `rungs_endpoint_recv`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct rungs_received {
    /// Bytes copied into the buffer.
    pub length: u32,
    /// Seat of the sender.
    pub seat: u8,
    /// 1 when a message was copied, 0 when none was waiting.
    pub received: u8,
    /// Zero.
    pub reserved: [u8; 2],
}

/// One link's health and counters, filled by `rungs_endpoint_link_stats`.
/// Round trips are microseconds (`RUNGS_RTT_NONE` before the first clean
/// sample); counters saturate at `UINT32_MAX`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct rungs_link_stats {
    /// Set to `sizeof(rungs_link_stats)` before the call.
    pub struct_size: u32,
    /// `RUNGS_LINK_*` flag bits.
    pub flags: u32,
    /// Smoothed round trip (RFC 6298).
    pub srtt_us: u32,
    /// Round-trip variance.
    pub rttvar_us: u32,
    /// Latest sample.
    pub latest_rtt_us: u32,
    /// Smallest sample ever.
    pub min_rtt_us: u32,
    /// Worst sample of the last ten seconds, or the latest if none (S3).
    pub worst_recent_rtt_us: u32,
    /// Current retransmission timeout, backoff included.
    pub rto_us: u32,
    /// Round-trip samples taken.
    pub rtt_samples: u32,
    /// Share of recent packets never acknowledged, per mille.
    pub loss_permille: u32,
    /// Datagrams sent to the peer.
    pub packets_sent: u32,
    /// Valid datagrams received from the peer.
    pub packets_received: u32,
    /// Bytes sent.
    pub bytes_sent: u32,
    /// Bytes of valid datagrams received.
    pub bytes_received: u32,
    /// Messages queued by `rungs_endpoint_send`.
    pub messages_sent: u32,
    /// Messages handed out by `rungs_endpoint_recv`.
    pub messages_delivered: u32,
    /// Message transmissions after the first.
    pub messages_retransmitted: u32,
    /// Retransmission timeouts fired.
    pub rto_expirations: u32,
    /// Messages that arrived again after they had already arrived.
    pub duplicate_messages: u32,
    /// Messages not yet acknowledged.
    pub messages_in_flight: u32,
    /// Milliseconds since a valid packet arrived; `RUNGS_NEVER_HEARD` if never.
    pub last_heard_ms_ago: u32,
    /// Dropped datagrams claiming to come from this peer, indexed by
    /// `RUNGS_DROP_*` (only the peer-attributable reasons can be non-zero).
    pub dropped: [u32; RUNGS_DROP_REASON_COUNT as usize],
}

/// A transport endpoint: one UDP socket, one link per peer seat. Opaque.
pub struct rungs_endpoint(Guarded<EndpointState>);

impl Handle for rungs_endpoint {
    type State = EndpointState;
    fn guarded(&self) -> &Guarded<EndpointState> {
        &self.0
    }
}

/// Who drives the socket: the engine through `poll`, or the worker thread.
pub enum Driving {
    /// The engine polls. Boxed: the driver is large, the other states small.
    Engine(Box<UdpDriver>),
    /// A worker thread polls.
    Worker(Worker),
    /// Only while switching between the two.
    Switching,
}

/// The endpoint behind a `rungs_endpoint` handle, with the engine's callback.
pub struct EndpointState {
    driving: Driving,
    on_link_event: rungs_link_event_fn,
    user: *mut c_void,
    /// The latest `now_us` the engine passed (the worker clock starts there).
    last_now_us: u64,
    /// Events taken from the endpoint, waiting for the callback or a poll.
    events: VecDeque<(u8, LinkEvent)>,
    /// `rungs_endpoint_set_protocol_mismatch`'s callback.
    protocol_mismatch: Option<MismatchCallback>,
    /// Mismatch reports waiting for that callback (`true`: the seat's link
    /// was just lost, and this says why); kept only while one is set.
    mismatches: VecDeque<(ProtocolMismatch, bool)>,
}

impl EndpointState {
    /// Run `f` on the driver at the right time: the engine's `now_us`, or
    /// the worker's clock with the driver locked.
    fn with_driver<R>(
        &mut self,
        now_us: u64,
        f: impl FnOnce(&mut UdpDriver, u64) -> R,
    ) -> Result<R> {
        match &mut self.driving {
            Driving::Engine(driver) => {
                self.last_now_us = now_us;
                Ok(f(driver, now_us))
            }
            Driving::Worker(worker) => {
                let now = worker.clock().now_us();
                let mut driver = worker.lock();
                Ok(f(&mut driver, now))
            }
            Driving::Switching => Err(Error::State("the transport worker failed to stop").into()),
        }
    }

    /// Run `f` on the endpoint (no I/O), at the latest time known.
    fn endpoint<R>(&mut self, f: impl FnOnce(&mut Endpoint) -> R) -> Result<R> {
        self.with_driver(self.last_now_us, |d, _| f(d.endpoint_mut()))
    }

    /// Keep the endpoint's new link events (at most 64, the oldest dropped first).
    fn keep_events(&mut self) -> Result<()> {
        let mut new = Vec::new();
        let mut mismatches = Vec::new();
        self.endpoint(|e| {
            mismatches
                .extend(std::iter::from_fn(|| e.poll_protocol_mismatch()).map(|m| (m, false)));
            while let Some((seat, event, cause)) = e.poll_event_explained() {
                // Silent because it speaks another version: say so too.
                mismatches.extend(cause.map(|mismatch| (mismatch, true)));
                new.push((seat, event));
            }
        })?;
        for event in new {
            keep_bounded(&mut self.events, event);
        }
        if self.protocol_mismatch.is_some() {
            for mismatch in mismatches {
                keep_bounded(&mut self.mismatches, mismatch);
            }
        }
        Ok(())
    }

    /// Tell the engine's mismatch callback every waiting report.
    fn tell_mismatches(&mut self) {
        while let Some((mismatch, link_lost)) = self.mismatches.pop_front() {
            // SAFETY: the engine's callback and user, by contract.
            unsafe { deliver_mismatch(self.protocol_mismatch.as_ref(), &mismatch, link_lost) };
        }
    }
}

/// Keep `item` at the back of `queue`, dropping the oldest beyond
/// [`MAX_KEPT_EVENTS`].
fn keep_bounded<T>(queue: &mut VecDeque<T>, item: T) {
    if queue.len() == MAX_KEPT_EVENTS {
        queue.pop_front();
    }
    queue.push_back(item);
}

/// Link events an endpoint keeps for the engine.
const MAX_KEPT_EVENTS: usize = 64;

fn event_code(event: LinkEvent) -> u32 {
    match event {
        LinkEvent::Lost => RUNGS_LINK_EVENT_LOST,
        LinkEvent::Recovered => RUNGS_LINK_EVENT_RECOVERED,
        LinkEvent::Restarted => RUNGS_LINK_EVENT_RESTARTED,
    }
}

fn saturate(value: u64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

fn rtt_field(value: Option<u64>) -> u32 {
    // RUNGS_RTT_NONE is reserved, so a measured value stops one below it.
    value.map_or(RUNGS_RTT_NONE, |v| saturate(v).min(RUNGS_RTT_NONE - 1))
}

fn c_stats(stats: &LinkStats, now_us: u64) -> rungs_link_stats {
    let mut flags = 0;
    if stats.clean_measurement {
        flags |= RUNGS_LINK_CLEAN_MEASUREMENT;
    }
    if stats.retransmitting {
        flags |= RUNGS_LINK_RETRANSMITTING;
    }
    if stats.lost {
        flags |= RUNGS_LINK_LOST;
    }
    let mut dropped = [0u32; RUNGS_DROP_REASON_COUNT as usize];
    for reason in DropReason::ALL {
        dropped[reason.index()] = saturate(stats.dropped.get(reason));
    }
    rungs_link_stats {
        struct_size: std::mem::size_of::<rungs_link_stats>() as u32,
        flags,
        srtt_us: rtt_field(stats.srtt_us),
        rttvar_us: rtt_field(stats.rttvar_us),
        latest_rtt_us: rtt_field(stats.latest_rtt_us),
        min_rtt_us: rtt_field(stats.min_rtt_us),
        worst_recent_rtt_us: rtt_field(stats.worst_recent_rtt_us),
        rto_us: saturate(stats.rto_us),
        rtt_samples: saturate(stats.rtt_samples),
        loss_permille: stats.loss_permille,
        packets_sent: saturate(stats.packets_sent),
        packets_received: saturate(stats.packets_received),
        bytes_sent: saturate(stats.bytes_sent),
        bytes_received: saturate(stats.bytes_received),
        messages_sent: saturate(stats.messages_sent),
        messages_delivered: saturate(stats.messages_delivered),
        messages_retransmitted: saturate(stats.messages_retransmitted),
        rto_expirations: saturate(stats.rto_expirations),
        duplicate_messages: saturate(stats.duplicate_messages),
        messages_in_flight: saturate(stats.messages_in_flight),
        last_heard_ms_ago: stats.last_heard_us.map_or(RUNGS_NEVER_HEARD, |heard| {
            saturate(now_us.saturating_sub(heard) / 1000).min(RUNGS_NEVER_HEARD - 1)
        }),
        dropped,
    }
}

/// Read the NUL-terminated address argument or field `name`, like
/// `"127.0.0.1:7000"` or `"[::1]:7000"`.
///
/// # Safety
/// `text` is a valid NUL-terminated string.
pub(crate) unsafe fn parse_address(text: *const c_char, name: &str) -> Result<SocketAddr> {
    // SAFETY: by contract.
    let text = unsafe { CStr::from_ptr(text) };
    text.to_str()
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| {
            Error::invalid_value(
                name.to_string(),
                format!("{:?}", text.to_string_lossy()),
                "\"ip:port\", e.g. \"127.0.0.1:7000\" or \"[::1]:7000\"",
            )
        })
        .map_err(CallError::from)
}

fn link_config(config: &rungs_endpoint_config) -> Result<LinkConfig> {
    let defaults = LinkConfig::default();
    let keepalive_interval_us = match config.keepalive_interval_ms {
        0 => defaults.keepalive_interval_us,
        RUNGS_KEEPALIVE_OFF => 0,
        ms => u64::from(ms) * 1000,
    };
    let liveness_timeout_us = match config.liveness_timeout_ms {
        0 => None,
        ms => Some(u64::from(ms) * 1000),
    };
    let max_in_flight = match config.max_in_flight {
        0 => defaults.max_in_flight,
        n => in_range(n, 1, MAX_IN_FLIGHT_LIMIT as u32, "config->max_in_flight")? as usize,
    };
    let link = LinkConfig {
        keepalive_interval_us,
        liveness_timeout_us,
        max_in_flight,
        ..defaults
    };
    link.validate()?;
    Ok(link)
}

/// Fill `config` with defaults: `struct_size` set, session 0, seat 0,
/// default timers, bind `"0.0.0.0:0"`, no callback — and an all-zero key,
/// which `rungs_endpoint_new` refuses: set `key` to the game's secret (S8).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if config is NULL;
/// RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_config_init(
    config: *mut rungs_endpoint_config,
) -> rungs_result {
    call("rungs_endpoint_config_init", || {
        let defaults = rungs_endpoint_config {
            struct_size: std::mem::size_of::<rungs_endpoint_config>() as u32,
            session_id: 0,
            key: [0; 16],
            local_seat: 0,
            reserved: [0; 3],
            keepalive_interval_ms: 0,
            liveness_timeout_ms: 0,
            max_in_flight: 0,
            bind_address: std::ptr::null(),
            on_link_event: None,
            user: std::ptr::null_mut(),
        };
        // SAFETY: NULL (refused) or valid for writes by the caller's contract.
        unsafe { write_to(config, "config", defaults) }
    })
}

/// Create an endpoint: validate `config`, bind its UDP socket (non-blocking)
/// and write the handle to `*out`. Nothing is sent until peers are added
/// and `rungs_endpoint_poll` runs; no thread is started.
/// Errors: `RUNGS_ERR_NULL_POINTER`, `RUNGS_ERR_INVALID_ARGUMENT` (struct_size,
/// reserved bytes, ranges, address text), `RUNGS_ERR_IO` (bind failed).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if config or out is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if config->struct_size is too small, reserved is
/// not zero, key is all zero (as rungs_endpoint_config_init leaves it), a timer
/// or max_in_flight is out of range, or bind_address does not parse;
/// RUNGS_ERR_IO if the socket cannot be bound; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_new(
    config: *const rungs_endpoint_config,
    out: *mut *mut rungs_endpoint,
) -> rungs_result {
    call("rungs_endpoint_new", || {
        require(out, "out")?;
        // SAFETY: read_config checks NULL and struct_size before reading the rest.
        let config = unsafe { read_config(config, "config")? };
        for (i, &byte) in config.reserved.iter().enumerate() {
            reserved_zero(byte, &format!("config->reserved[{i}]"))?;
        }
        if config.key == [0; 16] {
            return Err(Error::invalid_value(
                "config->key",
                "all zero (rungs_endpoint_config_init leaves it so)",
                "the game's 16-byte secret key",
            )
            .into());
        }
        let link = link_config(&config)?;
        let bind = if config.bind_address.is_null() {
            SocketAddr::from(([0, 0, 0, 0], 0))
        } else {
            // SAFETY: non-NULL and NUL-terminated by the caller's contract.
            unsafe { parse_address(config.bind_address, "config->bind_address")? }
        };
        let mut endpoint = Endpoint::new(EndpointConfig {
            session_id: config.session_id,
            key: SessionKey(config.key),
            local_seat: config.local_seat,
            link,
        })?;
        endpoint.set_epoch(wall_clock_epoch())?;
        let driver = UdpDriver::bind(bind, endpoint)?;
        let state = EndpointState {
            driving: Driving::Engine(Box::new(driver)),
            on_link_event: config.on_link_event,
            user: config.user,
            last_now_us: 0,
            events: VecDeque::new(),
            protocol_mismatch: None,
            mismatches: VecDeque::new(),
        };
        // SAFETY: `out` is NULL (refused) or writable by contract.
        unsafe { hand_out(out, rungs_endpoint(Guarded::new(state))) }
    })
}

/// A connection epoch for this run (S8): wall-clock milliseconds modulo
/// 2^32, so a restarted program's epoch is newer in serial order (for half
/// the range, 24 days). Only the edge reads the wall clock; the core takes
/// the epoch as a value.
pub(crate) fn wall_clock_epoch() -> u32 {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_millis() as u64);
    (ms as u32).max(1)
}

/// Free an endpoint: stops its worker thread if one runs, closes the socket.
/// NULL is accepted. Refused with `RUNGS_ERR_REENTRANT` from inside the
/// endpoint's own callback.
///
/// Returns: RUNGS_OK (also for NULL); RUNGS_ERR_REENTRANT from inside its own
/// callback; RUNGS_ERR_BUSY while another thread is in a call on it (not
/// freed); RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_free(endpoint: *mut rungs_endpoint) -> rungs_result {
    // SAFETY: NULL or a live handle from rungs_endpoint_new, not used after.
    unsafe { free_call("rungs_endpoint_free", endpoint) }
}

/// The UDP port the endpoint is bound to (the one the OS picked for port 0).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if endpoint or out_port is NULL;
/// RUNGS_ERR_IO if the OS cannot say.
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_local_port(
    endpoint: *mut rungs_endpoint,
    out_port: *mut u16,
) -> rungs_result {
    // SAFETY: NULL or a live handle, by contract.
    unsafe {
        object_call("rungs_endpoint_local_port", endpoint, |state| {
            require(out_port, "out_port")?;
            let address = state.with_driver(state.last_now_us, |d, _| d.local_addr())??;
            write_out(out_port, address.port());
            Ok(())
        })
    }
}

/// Add the peer at `seat`, bound to `address` (`"ip:port"` text, e.g.
/// `"192.0.2.7:7000"` or `"[2001:db8::7]:7000"`), at `now_us` (your
/// monotonic clock, µs, as for `rungs_endpoint_poll`): the link's liveness
/// counts from then, so a peer added before the first poll is not reported
/// lost at it. While a worker runs, its own clock is used instead. Datagrams
/// claiming to be from `seat` are accepted only from that address.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if endpoint or address is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if address does not parse or seat is this
/// endpoint's own; RUNGS_ERR_STATE if seat already has a peer.
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_add_peer(
    endpoint: *mut rungs_endpoint,
    seat: u8,
    address: *const c_char,
    now_us: u64,
) -> rungs_result {
    // SAFETY: NULL or a live handle, by contract.
    unsafe {
        object_call("rungs_endpoint_add_peer", endpoint, |state| {
            require(address, "address")?;
            let address = parse_address(address, "address")?;
            state
                .with_driver(now_us, |d, now| {
                    d.endpoint_mut().add_peer(seat, address, now)
                })?
                .map_err(CallError::from)
        })
    }
}

/// Remove the peer at `seat` and its link (the engine decides; the transport
/// never removes anyone). `RUNGS_ERR_UNKNOWN_SEAT` if there is none.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if endpoint is NULL;
/// RUNGS_ERR_UNKNOWN_SEAT if seat has no peer.
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_remove_peer(
    endpoint: *mut rungs_endpoint,
    seat: u8,
) -> rungs_result {
    // SAFETY: NULL or a live handle, by contract.
    unsafe {
        object_call("rungs_endpoint_remove_peer", endpoint, |state| {
            state
                .endpoint(|e| e.remove_peer(seat))?
                .map_err(CallError::from)
        })
    }
}

/// Queue `len` bytes for reliable, in-order delivery to `seat`; they go out
/// on the next `rungs_endpoint_poll`. `data` may be NULL only when `len` is 0.
/// Errors: `RUNGS_ERR_UNKNOWN_SEAT`, `RUNGS_ERR_INVALID_ARGUMENT` (longer
/// than `RUNGS_MAX_MESSAGE_BYTES`), `RUNGS_ERR_FULL` (too many messages
/// unacknowledged: the peer is not answering; try again later).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if endpoint is NULL, or data is
/// NULL with len > 0; RUNGS_ERR_UNKNOWN_SEAT if seat has no peer;
/// RUNGS_ERR_INVALID_ARGUMENT if len is more than RUNGS_MAX_MESSAGE_BYTES;
/// RUNGS_ERR_FULL if max_in_flight messages are unacknowledged.
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_send(
    endpoint: *mut rungs_endpoint,
    seat: u8,
    data: *const u8,
    len: usize,
) -> rungs_result {
    // SAFETY: NULL or a live handle, by contract.
    unsafe {
        object_call("rungs_endpoint_send", endpoint, |state| {
            // The length first, so no slice is ever made of more bytes than
            // a message can have.
            if len > MAX_MESSAGE_BYTES {
                return Err(Error::invalid_value(
                    "len",
                    len,
                    format!("at most RUNGS_MAX_MESSAGE_BYTES ({MAX_MESSAGE_BYTES})"),
                )
                .into());
            }
            // SAFETY: NULL or `len` readable bytes by contract.
            let payload = slice_in(data, len, "data")?;
            state
                .endpoint(|e| e.send(seat, payload))?
                .map(|_| ())
                .map_err(CallError::from)
        })
    }
}

/// Drive the transport at `now_us`: read every waiting datagram, fire
/// timers (resends, keep-alives, liveness), send what is due, then report
/// link events to the callback (or keep them for `rungs_endpoint_poll_event`).
/// Never blocks. Call it every frame, and right after `rungs_endpoint_send`
/// for the lowest latency. With a worker running, only events are reported.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if endpoint is NULL;
/// RUNGS_ERR_STATE if the worker thread panicked and stopped (call
/// rungs_endpoint_stop_worker, then poll yourself).
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_poll(
    endpoint: *mut rungs_endpoint,
    now_us: u64,
) -> rungs_result {
    // SAFETY: NULL or a live handle, by contract.
    unsafe {
        object_call("rungs_endpoint_poll", endpoint, |state| {
            if let Driving::Worker(worker) = &state.driving {
                if worker.status() == WorkerStatus::Panicked {
                    return Err(Error::State(
                        "the transport worker thread panicked and stopped; call \
                         rungs_endpoint_stop_worker and poll yourself",
                    )
                    .into());
                }
            }
            if matches!(state.driving, Driving::Engine(_)) {
                state.with_driver(now_us, |d, now| d.poll(now))?;
            }
            state.keep_events()?;
            // Callbacks run with the driver unlocked, in order, on this thread;
            // a mismatch that explains a lost link comes before the LOST event.
            state.tell_mismatches();
            if let Some(callback) = state.on_link_event {
                while let Some((seat, event)) = state.events.pop_front() {
                    callback(state.user, seat, event_code(event));
                }
            }
            Ok(())
        })
    }
}

/// Set (or, with NULL, clear) the callback told when a peer's address
/// sends packets of another transport protocol version (see
/// `rungs_protocol_mismatch_fn`: once per seat and version, and again with
/// `link_lost` 1 just before that seat's `RUNGS_LINK_EVENT_LOST` when the
/// mismatch explains the silence), with its own `user`. Called from
/// `rungs_endpoint_poll` and `rungs_endpoint_poll_event`, on their thread,
/// before the link events they report. Reports
/// that come while no callback is set are not kept.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if endpoint is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_set_protocol_mismatch(
    endpoint: *mut rungs_endpoint,
    callback: rungs_protocol_mismatch_fn,
    user: *mut c_void,
) -> rungs_result {
    // SAFETY: NULL or a live handle, by contract.
    unsafe {
        object_call("rungs_endpoint_set_protocol_mismatch", endpoint, |state| {
            state.protocol_mismatch = callback.map(|_| MismatchCallback { callback, user });
            if callback.is_none() {
                state.mismatches.clear();
            }
            Ok(())
        })
    }
}

/// Take the next kept link event: `*out_seat` and `*out_event`
/// (`RUNGS_LINK_EVENT_NONE` when there is none). Events are kept only when
/// no callback is configured; at most 64, the oldest dropped first.
///
/// Returns: RUNGS_OK (also when there is no event); RUNGS_ERR_NULL_POINTER if
/// endpoint, out_seat or out_event is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_poll_event(
    endpoint: *mut rungs_endpoint,
    out_seat: *mut u8,
    out_event: *mut u32,
) -> rungs_result {
    // SAFETY: NULL or a live handle, by contract.
    unsafe {
        object_call("rungs_endpoint_poll_event", endpoint, |state| {
            require(out_seat, "out_seat")?;
            require(out_event, "out_event")?;
            state.keep_events()?;
            // Before the event it may explain.
            state.tell_mismatches();
            let (seat, event) = state
                .events
                .pop_front()
                .map_or((0, RUNGS_LINK_EVENT_NONE), |(s, e)| (s, event_code(e)));
            write_out(out_seat, seat);
            write_out(out_event, event);
            Ok(())
        })
    }
}

/// Copy the next delivered message (from any peer, seats in turn) into
/// `buf` of `cap` bytes and describe it in `*out` (`out->received` is 0 when
/// none was waiting). `RUNGS_ERR_BUFFER_TOO_SMALL` leaves the message
/// queued; a buffer of `RUNGS_MAX_MESSAGE_BYTES` always suffices. `buf` may
/// be NULL only when `cap` is 0.
///
/// Returns: RUNGS_OK (out->received 0 when nothing waits);
/// RUNGS_ERR_NULL_POINTER if endpoint or out is NULL, or buf is NULL with cap >
/// 0; RUNGS_ERR_BUFFER_TOO_SMALL if the next message is longer than cap (it
/// stays queued).
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_recv(
    endpoint: *mut rungs_endpoint,
    buf: *mut u8,
    cap: usize,
    out: *mut rungs_received,
) -> rungs_result {
    // SAFETY: NULL or a live handle, by contract.
    unsafe {
        object_call("rungs_endpoint_recv", endpoint, |state| {
            require(out, "out")?;
            // SAFETY: NULL or `cap` writable bytes by contract.
            let buf = slice_out(buf, cap, "buf")?;
            let got = state.endpoint(|e| e.recv_into(buf))??;
            let received = match got {
                Some((seat, len)) => rungs_received {
                    length: len as u32,
                    seat,
                    received: 1,
                    reserved: [0; 2],
                },
                None => rungs_received::default(),
            };
            write_out(out, received);
            Ok(())
        })
    }
}

/// Fill `*out` with the health and counters of the link to `seat` at
/// `now_us`. Set `out->struct_size = sizeof(rungs_link_stats)` first.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if endpoint or out is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if out->struct_size is not
/// sizeof(rungs_link_stats); RUNGS_ERR_UNKNOWN_SEAT if seat has no peer.
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_link_stats(
    endpoint: *mut rungs_endpoint,
    seat: u8,
    now_us: u64,
    out: *mut rungs_link_stats,
) -> rungs_result {
    // SAFETY: NULL or a live handle, by contract.
    unsafe {
        object_call("rungs_endpoint_link_stats", endpoint, |state| {
            require_sized_out(out, "out")?;
            let stats = state.with_driver(now_us, |d, now| {
                d.endpoint()
                    .link(seat)
                    .map(|link| c_stats(&link.stats(now), now))
                    .ok_or(Error::UnknownSeat(seat))
            })??;
            write_out(out, stats);
            Ok(())
        })
    }
}

/// The report figures (S3) of every link, by seat, at `now_us`: what a
/// session takes its round trips from (`rungs_session_sample_links`). A
/// refusal keeps its kind and says it was the endpoint's
/// (`endpoint: the object was poisoned ...`).
///
/// # Safety
/// `endpoint` is NULL or a live handle from `rungs_endpoint_new`.
pub(crate) unsafe fn link_report_rtts(
    endpoint: *const rungs_endpoint,
    now_us: u64,
) -> Result<Vec<(u8, crate::link::ReportRtt)>> {
    let mut links = Vec::new();
    // SAFETY: forwarded contract; the guard checks NULL and claims the endpoint.
    let entered = unsafe {
        enter(endpoint, |state| {
            state.with_driver(now_us, |d, now| {
                let endpoint = d.endpoint();
                links.extend(endpoint.peers().filter_map(|(seat, _)| {
                    endpoint.link(seat).map(|l| (seat, l.report_rtt(now)))
                }));
            })
        })
    };
    entered.map_err(|e| {
        let message = format!("endpoint: {e}");
        e.detailed(message)
    })?;
    Ok(links)
}

/// Datagrams the endpoint dropped for `reason` (a `RUNGS_DROP_*` value),
/// over all peers and unattributable ones. `RUNGS_ERR_INVALID_ARGUMENT` for
/// an unknown reason.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if endpoint or out_count is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if reason is not a RUNGS_DROP_* value.
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_dropped(
    endpoint: *mut rungs_endpoint,
    reason: rungs_drop_reason,
    out_count: *mut u64,
) -> rungs_result {
    // SAFETY: NULL or a live handle, by contract.
    unsafe {
        object_call("rungs_endpoint_dropped", endpoint, |state| {
            require(out_count, "out_count")?;
            let reason = *DropReason::ALL.get(reason as usize).ok_or_else(|| {
                Error::invalid_value(
                    "reason",
                    reason,
                    format!("a RUNGS_DROP_* value, 0 to {}", RUNGS_DROP_REASON_COUNT - 1),
                )
            })?;
            let count = state.endpoint(|e| e.total_drops().get(reason))?;
            write_out(out_count, count);
            Ok(())
        })
    }
}

/// Start a worker thread that polls the socket every `tick_us` microseconds
/// (1 000 to 1 000 000; 1 000 is a good choice) on its own clock, starting at
/// the last `now_us` the engine passed. Only ever started by this call (S7).
/// Link events still reach the engine only through `rungs_endpoint_poll` on
/// its own thread. `RUNGS_ERR_STATE` if a worker already runs.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if endpoint is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if tick_us is outside 1000 to 1000000;
/// RUNGS_ERR_STATE if a worker already runs; RUNGS_ERR_IO if the OS refuses a
/// thread.
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_start_worker(
    endpoint: *mut rungs_endpoint,
    tick_us: u32,
) -> rungs_result {
    // SAFETY: NULL or a live handle, by contract.
    unsafe {
        object_call("rungs_endpoint_start_worker", endpoint, |state| {
            in_range(tick_us, 1_000, 1_000_000, "tick_us")?;
            const ALREADY: &str =
                "a worker thread already runs; expected rungs_endpoint_stop_worker first";
            if !matches!(state.driving, Driving::Engine(_)) {
                return Err(Error::State(ALREADY).into());
            }
            let Driving::Engine(driver) = std::mem::replace(&mut state.driving, Driving::Switching)
            else {
                return Err(Error::State(ALREADY).into());
            };
            let clock = MonotonicClock::starting_at(state.last_now_us);
            // Worker::start only fails before taking the driver if the OS
            // refuses a thread; the driver is then lost with the error.
            let worker = Worker::start(*driver, Duration::from_micros(u64::from(tick_us)), clock)?;
            state.driving = Driving::Worker(worker);
            Ok(())
        })
    }
}

/// Stop the worker thread (joined before returning) and hand polling back to
/// the engine. `RUNGS_ERR_STATE` if no worker runs.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if endpoint is NULL;
/// RUNGS_ERR_STATE if no worker runs.
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_stop_worker(endpoint: *mut rungs_endpoint) -> rungs_result {
    // SAFETY: NULL or a live handle, by contract.
    unsafe {
        object_call("rungs_endpoint_stop_worker", endpoint, |state| {
            const NONE: &str = "no worker thread runs; expected rungs_endpoint_start_worker first";
            if !matches!(state.driving, Driving::Worker(_)) {
                return Err(Error::State(NONE).into());
            }
            let Driving::Worker(worker) = std::mem::replace(&mut state.driving, Driving::Switching)
            else {
                return Err(Error::State(NONE).into());
            };
            state.last_now_us = worker.clock().now_us();
            state.driving = Driving::Engine(Box::new(worker.stop()?));
            Ok(())
        })
    }
}

/// The endpoint's OS socket (`rungs_socket`: the file descriptor on Unix,
/// the `SOCKET` on Windows), so your loop can wait in select/poll for a
/// datagram before calling `rungs_endpoint_poll`. Only wait on it.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if endpoint or out_socket is NULL;
/// RUNGS_ERR_STATE while a worker thread drives the socket.
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_socket(
    endpoint: *mut rungs_endpoint,
    out_socket: *mut rungs_socket,
) -> rungs_result {
    // SAFETY: NULL or a live handle, by contract.
    unsafe {
        object_call("rungs_endpoint_socket", endpoint, |state| {
            require(out_socket, "out_socket")?;
            let Driving::Engine(driver) = &state.driving else {
                return Err(Error::State(
                    "a worker thread drives the socket; expected rungs_endpoint_stop_worker first",
                )
                .into());
            };
            write_out(out_socket, driver.raw_socket());
            Ok(())
        })
    }
}

/// Give the link to `seat` its own 16-byte key (S8 per-pair keys): game
/// setup hands both machines of each pair the same key and nobody else, so
/// no player can sign a packet as another (the single session key cannot
/// stop that). Call after `rungs_endpoint_add_peer`, before traffic.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if endpoint or key is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if the key is all zero; RUNGS_ERR_UNKNOWN_SEAT if
/// seat has no peer.
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_set_link_key(
    endpoint: *mut rungs_endpoint,
    seat: u8,
    key: *const [u8; 16],
) -> rungs_result {
    // SAFETY: NULL or a live handle, by contract.
    unsafe {
        object_call("rungs_endpoint_set_link_key", endpoint, |state| {
            require(key, "key")?;
            let key = SessionKey(*key);
            state
                .endpoint(|e| e.set_link_key(seat, key))?
                .map_err(CallError::from)
        })
    }
}

/// Whether the worker thread runs: `*out_status` is 0 (no worker), 1
/// (polling) or 2 (it panicked, caught the panic and stopped polling: call
/// `rungs_endpoint_stop_worker`).
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if endpoint or out_status is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_endpoint_worker_status(
    endpoint: *mut rungs_endpoint,
    out_status: *mut u32,
) -> rungs_result {
    // SAFETY: NULL or a live handle, by contract.
    unsafe {
        object_call("rungs_endpoint_worker_status", endpoint, |state| {
            let status = match &state.driving {
                Driving::Worker(worker) => match worker.status() {
                    WorkerStatus::Panicked => 2,
                    _ => 1,
                },
                _ => 0,
            };
            write_to(out_status, "out_status", status)
        })
    }
}

/// The name of a `RUNGS_DROP_*` reason, e.g. `"bad_tag"`; `"unknown"` for
/// any other value. Static storage: never free it.
#[no_mangle]
pub extern "C" fn rungs_drop_reason_str(reason: rungs_drop_reason) -> *const c_char {
    const NAMES: [&[u8]; 14] = [
        b"too_short\0",
        b"too_long\0",
        b"bad_magic\0",
        b"bad_version\0",
        b"wrong_session\0",
        b"unknown_sender\0",
        b"spoofed_address\0",
        b"bad_tag\0",
        b"replayed\0",
        b"outside_window\0",
        b"malformed\0",
        b"receiver_full\0",
        b"stale_epoch\0",
        b"unknown\0",
    ];
    let index = (reason as usize).min(NAMES.len() - 1);
    NAMES[index].as_ptr().cast()
}

// Keep the C names in step with the Rust names.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_reason_names_match() {
        for reason in DropReason::ALL {
            let name = unsafe { CStr::from_ptr(rungs_drop_reason_str(reason.index() as u32)) };
            assert_eq!(name.to_str().unwrap(), reason.name());
        }
        let unknown = unsafe { CStr::from_ptr(rungs_drop_reason_str(99)) };
        assert_eq!(unknown.to_str().unwrap(), "unknown");
    }
}
