//! A lockstep session on its own UDP socket: the core's update loop
//! ([`LockstepSession::update`]) with the socket read before it and written
//! after it, for engines (and the C API) that poll from their frame loop and
//! may wait on the socket themselves ([`LockstepDriver::socket`]).

use std::net::SocketAddr;

use rungs_core::error::Result;
use rungs_core::session::{ExecutedCommand, LockstepSession, Wake};

use crate::udp::{RawSocket, UdpDriver};

/// A lockstep session on its own UDP socket, polled from the engine's loop.
#[derive(Debug)]
pub struct LockstepDriver {
    udp: UdpDriver<LockstepSession>,
}

impl LockstepDriver {
    /// Bind a non-blocking socket to `address` for `session`.
    pub fn bind(address: SocketAddr, session: LockstepSession) -> Result<LockstepDriver> {
        Ok(LockstepDriver {
            udp: UdpDriver::bind(address, session)?,
        })
    }

    /// Read the socket, [`update`](LockstepSession::update), send: one
    /// iteration of the engine's loop at `now_us`.
    pub fn update(
        &mut self,
        now_us: u64,
        on_command: impl FnMut(u32, &ExecutedCommand),
    ) -> Result<Wake> {
        self.udp.poll(now_us);
        let wake = self.udp.inner_mut().update(now_us, on_command)?;
        self.udp.poll(now_us); // a send frame's turn goes out now
        Ok(wake)
    }

    /// The session.
    pub fn session(&self) -> &LockstepSession {
        self.udp.inner()
    }

    /// The session, mutably (submit commands, leave, drop players).
    pub fn session_mut(&mut self) -> &mut LockstepSession {
        self.udp.inner_mut()
    }

    /// The bound address (with the port the OS picked).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.udp.local_addr()
    }

    /// The OS socket, for a loop that waits in `select`/`poll` for a
    /// datagram or [`Wake::next_us`], whichever comes first. Only wait on
    /// it; reading it would steal the session's datagrams.
    pub fn socket(&self) -> RawSocket {
        self.udp.raw_socket()
    }
}
