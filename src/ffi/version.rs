//! Library, ABI and protocol versions, and the report of a peer that
//! speaks another protocol version.

use std::ffi::c_void;

use super::args::{require_sized_out, write_out};
use super::guard::call;
use super::lockstep::{lockstep_call, rungs_lockstep};
use super::result::rungs_result;
use crate::link::{Protocol, ProtocolMismatch};

/// The ABI version of this header. It changes only when an existing
/// declaration changes incompatibly; additions keep it.
pub const RUNGS_ABI_VERSION: u32 = 3;

/// The ABI version of the library actually loaded: compare it with
/// `RUNGS_ABI_VERSION` from the header you compiled against.
#[no_mangle]
pub extern "C" fn rungs_abi_version() -> u32 {
    RUNGS_ABI_VERSION
}

/// The library version, e.g. `"0.3.0"`, the same as `RUNGS_VERSION_STRING`.
/// Static storage: never free it.
#[no_mangle]
pub extern "C" fn rungs_version() -> *const libc::c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Which of rungs' protocols a version is of, one of `RUNGS_PROTOCOL_*`.
pub type rungs_protocol = u8;

/// The transport packet layout: every datagram of a peer-to-peer game and
/// of a relay link (`rungs_protocol_versions.wire`).
pub const RUNGS_PROTOCOL_WIRE: rungs_protocol = 0;
/// The lockstep session's messages between players: turns, clock pings,
/// drops (`rungs_protocol_versions.turn`).
pub const RUNGS_PROTOCOL_TURN: rungs_protocol = 1;
/// The relay protocol (`rungs_protocol_versions.relay`).
pub const RUNGS_PROTOCOL_RELAY: rungs_protocol = 2;

/// The protocol versions this library speaks (`rungs_read_protocol_versions`).
/// A lobby sends them with each player's entry and lets a game start only
/// among players whose three numbers are all equal: two builds interoperate
/// if and only if `wire`, `turn` and `relay` are equal (compare the fields,
/// not the whole struct). Builds that differ refuse each other's datagrams;
/// the session reports it (`rungs_lockstep_set_protocol_mismatch`), but
/// the game cannot go on with that player.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct rungs_protocol_versions {
    /// Set to `sizeof(rungs_protocol_versions)` before the call.
    pub struct_size: u32,
    /// The transport packet layout version (`RUNGS_PROTOCOL_WIRE`).
    pub wire: u8,
    /// The lockstep turn layout version (`RUNGS_PROTOCOL_TURN`).
    pub turn: u8,
    /// The relay protocol version (`RUNGS_PROTOCOL_RELAY`).
    pub relay: u8,
    /// Written as 0.
    pub reserved: u8,
}

/// Fill `*out` with the protocol versions this library speaks (the Rust
/// `rungs_core::protocol_versions()`). Set `out->struct_size =
/// sizeof(rungs_protocol_versions)` first.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if out is NULL;
/// RUNGS_ERR_INVALID_ARGUMENT if out->struct_size is not
/// sizeof(rungs_protocol_versions); RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_read_protocol_versions(
    out: *mut rungs_protocol_versions,
) -> rungs_result {
    call("rungs_read_protocol_versions", || {
        // SAFETY: NULL or valid for reads and writes of the struct by the
        // caller's contract.
        let struct_size = unsafe { require_sized_out(out, "out") }?;
        let versions = rungs_core::protocol_versions();
        // SAFETY: as above.
        unsafe {
            write_out(
                out,
                rungs_protocol_versions {
                    struct_size,
                    wire: versions.wire,
                    turn: versions.turn,
                    relay: versions.relay,
                    reserved: 0,
                },
            )
        };
        Ok(())
    })
}

/// Another player's machine speaks another protocol version: datagrams from
/// the address of `seat` carry rungs' magic but another `protocol`
/// (`RUNGS_PROTOCOL_*`) version, `theirs`; this library speaks `ours`.
/// Called once per seat and version, however many datagrams come. With
/// `link_lost` 1 it comes just before `link_event(seat, LOST)` and says why
/// that seat fell silent. `text` names both versions, e.g. `seat 2 speaks
/// wire protocol 5; this build speaks 4` (after `link to seat 2 lost: ` when
/// `link_lost`); it lives until the callback returns.
///
/// The transport version byte is not authenticated: anyone who can send
/// from that seat's address can cause this call (once per version), and
/// nothing else: rungs changes no state for it and drops nobody because of
/// it.
pub type rungs_protocol_mismatch_fn = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        seat: u8,
        protocol: rungs_protocol,
        theirs: u8,
        ours: u8,
        link_lost: u8,
        text: *const libc::c_char,
    ),
>;

/// Set (or, with NULL, clear) the callback told when another player's
/// machine speaks another protocol version (see
/// `rungs_protocol_mismatch_fn`), with its own `user`. Peer-to-peer only:
/// behind a relay a relay of another version refuses this machine and
/// `rungs_lockstep_update` returns RUNGS_ERR_STATE with a message naming
/// both versions.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if ls is NULL.
#[no_mangle]
pub unsafe extern "C" fn rungs_lockstep_set_protocol_mismatch(
    ls: *mut rungs_lockstep,
    callback: rungs_protocol_mismatch_fn,
    user: *mut c_void,
) -> rungs_result {
    unsafe {
        lockstep_call("rungs_lockstep_set_protocol_mismatch", ls, |o| {
            o.protocol_mismatch = Some(MismatchCallback { callback, user });
            Ok(())
        })
    }
}

/// A `rungs_protocol_mismatch_fn` and its `user`.
#[derive(Clone, Copy)]
pub(super) struct MismatchCallback {
    pub(super) callback: rungs_protocol_mismatch_fn,
    pub(super) user: *mut c_void,
}

/// The C value of `protocol`.
fn protocol_code(protocol: Protocol) -> rungs_protocol {
    match protocol {
        Protocol::Wire => RUNGS_PROTOCOL_WIRE,
        Protocol::Turn => RUNGS_PROTOCOL_TURN,
        Protocol::Relay => RUNGS_PROTOCOL_RELAY,
    }
}

/// The words `text` carries for a mismatch.
pub(super) fn mismatch_text(mismatch: &ProtocolMismatch, link_lost: bool) -> String {
    if link_lost {
        format!("link to seat {} lost: {mismatch}", mismatch.seat)
    } else {
        mismatch.to_string()
    }
}

/// Hand a mismatch to the engine's callback (none set: nothing).
///
/// # Safety
/// The function pointer and user pointer are the engine's, valid for this call.
pub(super) unsafe fn deliver_mismatch(
    to: Option<&MismatchCallback>,
    mismatch: &ProtocolMismatch,
    link_lost: bool,
) {
    let Some(MismatchCallback {
        callback: Some(f),
        user,
    }) = to.copied()
    else {
        return;
    };
    // Interior NULs cannot occur: the text is digits and fixed words.
    let text = std::ffi::CString::new(mismatch_text(mismatch, link_lost)).unwrap_or_default();
    // SAFETY: by contract; `text` lives until the callback returns.
    unsafe {
        f(
            user,
            mismatch.seat,
            protocol_code(mismatch.protocol),
            mismatch.theirs,
            mismatch.ours,
            u8::from(link_lost),
            text.as_ptr(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_c_call_gives_the_rust_numbers() {
        let mut out = rungs_protocol_versions {
            struct_size: std::mem::size_of::<rungs_protocol_versions>() as u32,
            ..Default::default()
        };
        // SAFETY: a valid out-struct.
        assert_eq!(unsafe { rungs_read_protocol_versions(&mut out) }, 0);
        let rust = rungs_core::protocol_versions();
        assert_eq!(
            (out.wire, out.turn, out.relay, out.reserved),
            (rust.wire, rust.turn, rust.relay, 0)
        );
    }
}
