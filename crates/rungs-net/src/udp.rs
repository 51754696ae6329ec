//! The UDP driver: one non-blocking socket per machine feeding one sans-IO
//! state machine — an [`Endpoint`], or a whole lockstep session — through the
//! [`Datagrams`] trait. The engine calls [`UdpDriver::poll`] with its clock
//! (from its frame loop), or hands the driver to a [`Worker`](super::Worker).

use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};

use socket2::{Domain, Protocol, Socket, Type};

use rungs_core::error::Result;
use rungs_core::io::Datagrams;
use rungs_core::link::{canonical_address, Endpoint};
use rungs_core::wire::MAX_PACKET_BYTES;

/// An OS socket handle as a fixed-width integer: a Unix file descriptor
/// (non-negative) or a Windows `SOCKET`, both fit 64 bits.
pub type RawSocket = u64;

/// Most datagrams one [`UdpDriver::poll`] reads, so a flood cannot hold the
/// engine's frame loop.
pub const MAX_DATAGRAMS_PER_POLL: usize = 1024;

/// What one [`UdpDriver::poll`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PollOutcome {
    /// Datagrams read from the socket (valid or not).
    pub received: usize,
    /// Datagrams written to the socket.
    pub sent: usize,
}

/// I/O trouble the driver absorbed (UDP is lossy anyway; the link resends).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoCounters {
    /// Sends the OS refused (full buffer, unreachable host); the datagram is
    /// treated as lost.
    pub send_errors: u64,
    /// Receive errors other than "nothing to read".
    pub receive_errors: u64,
    /// The latest error of either kind.
    pub last_error: Option<ErrorKind>,
}

/// One UDP socket and the state machine it serves (an [`Endpoint`] unless
/// told otherwise).
#[derive(Debug)]
pub struct UdpDriver<D = Endpoint> {
    socket: UdpSocket,
    ipv6_socket: bool,
    endpoint: D,
    io: IoCounters,
    receive_buf: Vec<u8>,
    send_buf: Vec<u8>,
}

impl UdpDriver<Endpoint> {
    /// The endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The endpoint, mutably (add peers, send, receive, read stats).
    pub fn endpoint_mut(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }
}

impl<D: Datagrams> UdpDriver<D> {
    /// Bind a non-blocking UDP socket to `address` (port 0 picks a free
    /// port). An IPv6 unspecified address (`[::]:port`) binds dual-stack, so
    /// IPv4 peers work too; their mapped addresses compare as IPv4.
    pub fn bind(address: SocketAddr, endpoint: D) -> Result<UdpDriver<D>> {
        let socket = Socket::new(
            Domain::for_address(address),
            Type::DGRAM,
            Some(Protocol::UDP),
        )?;
        if let SocketAddr::V6(v6) = address {
            if v6.ip().is_unspecified() {
                socket.set_only_v6(false)?;
            }
        }
        socket.set_nonblocking(true)?;
        socket.bind(&address.into())?;
        Ok(UdpDriver {
            socket: socket.into(),
            ipv6_socket: address.is_ipv6(),
            endpoint,
            io: IoCounters::default(),
            // One spare byte tells an over-long datagram from a maximal one.
            receive_buf: vec![0; MAX_PACKET_BYTES + 1],
            send_buf: vec![0; MAX_PACKET_BYTES],
        })
    }

    /// The address the socket is bound to (with the port the OS picked).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.socket.local_addr()?)
    }

    /// The OS socket handle: the file descriptor on Unix, the `SOCKET` on
    /// Windows, widened to 64 bits. For waiting (`select`/`poll`) only.
    pub fn raw_socket(&self) -> RawSocket {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            self.socket.as_raw_fd() as RawSocket
        }
        #[cfg(windows)]
        {
            use std::os::windows::io::AsRawSocket;
            self.socket.as_raw_socket() as RawSocket
        }
    }

    /// The state machine the socket serves.
    pub fn inner(&self) -> &D {
        &self.endpoint
    }

    /// The state machine, mutably.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.endpoint
    }

    /// I/O errors absorbed so far.
    pub fn io_counters(&self) -> IoCounters {
        self.io
    }

    /// Read every waiting datagram (up to [`MAX_DATAGRAMS_PER_POLL`]) into the
    /// endpoint, fire its timers, and send everything it wants to send, all
    /// at `now_us`. Never blocks.
    pub fn poll(&mut self, now_us: u64) -> PollOutcome {
        let mut outcome = PollOutcome::default();
        // Bounded in attempts, not just datagrams, so a socket that keeps
        // failing cannot spin here either.
        for _ in 0..MAX_DATAGRAMS_PER_POLL {
            match self.socket.recv_from(&mut self.receive_buf) {
                Ok((len, source)) => {
                    outcome.received += 1;
                    self.endpoint
                        .handle_datagram(now_us, source, &self.receive_buf[..len]);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    // Windows reports an ICMP "port unreachable" for an earlier
                    // send as a receive error (WSAECONNRESET), and an over-long
                    // datagram as WSAEMSGSIZE: neither stops the socket.
                    self.io.receive_errors += 1;
                    self.io.last_error = Some(e.kind());
                    if !matches!(
                        e.kind(),
                        ErrorKind::ConnectionReset | ErrorKind::ConnectionRefused
                    ) && e.raw_os_error() != Some(WSAEMSGSIZE)
                    {
                        break;
                    }
                }
            }
        }
        self.endpoint.handle_timeout(now_us);
        while let Some(transmit) = self.endpoint.poll_transmit(now_us, &mut self.send_buf) {
            let destination = self.socket_address(transmit.destination);
            match self
                .socket
                .send_to(&self.send_buf[..transmit.len], destination)
            {
                Ok(_) => outcome.sent += 1,
                Err(e) => {
                    self.io.send_errors += 1;
                    self.io.last_error = Some(e.kind());
                }
            }
        }
        outcome
    }

    /// An IPv6 socket reaches an IPv4 peer through its mapped address.
    fn socket_address(&self, destination: SocketAddr) -> SocketAddr {
        match canonical_address(destination) {
            SocketAddr::V4(v4) if self.ipv6_socket => {
                SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port())
            }
            other => other,
        }
    }
}

/// Winsock's "message too long" (a datagram larger than the buffer).
const WSAEMSGSIZE: i32 = 10040;
