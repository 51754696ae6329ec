//! C API of relay tickets (S10): a lobby written in C issues a ticket per
//! seat with the secret it shares with its relays, and hands the player the
//! ticket, its link secret and the relay's address; a player reads the text
//! form `rungs-relay ticket` prints (`<ticket hex>:<link secret hex>`).
//! Thin wrappers over [`crate::relay::ticket`].

use std::ffi::CStr;

use super::args::{in_range, require, slice_in, slice_out, write_optional, write_out};
use super::guard::call;
use super::result::rungs_result;
use crate::error::Error;
use crate::relay::ticket::{issue, Credentials, LobbySecret, TicketFields};
use crate::wire::relay::TICKET_BYTES;

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
) -> crate::Result<()> {
    require(ticket_out, "ticket_out")?;
    require(ticket_len, "ticket_len")?;
    require(link_secret_out, "link_secret_out")?;
    if ticket_cap < TICKET_BYTES {
        return Err(Error::BufferTooSmall {
            needed: TICKET_BYTES,
        });
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
            Error::InvalidValue("lobby_secret is all zero; expected the lobby's secret key".into())
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
            Error::InvalidValue("text is not UTF-8; expected <ticket hex>:<link secret hex>".into())
        })?;
        let not_credentials = |e: Error| {
            Error::InvalidValue(format!(
                "text is not credentials ({e}); expected <84 hex digits>:<32 hex digits>"
            ))
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

/// A connection-nonce seed for this process (relay topology of
/// `rungs_lockstep`): the wall clock's nanoseconds, the process id and an
/// address of this process, mixed; different per process and not guessable
/// from outside, which is all the nonces need (S10).
pub(crate) fn process_nonce_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let local = 0u8;
    let address = &local as *const u8 as u64;
    let mut rng = crate::sim::SplitMix64::new(
        nanos ^ u64::from(std::process::id()).rotate_left(32) ^ address.rotate_left(17),
    );
    rng.next_u64()
}
