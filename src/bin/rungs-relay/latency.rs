//! What the relay process adds to a datagram's journey, measured in the
//! serving loop and read through the admin socket (`latency`), for the load
//! generator (`rungs-relay-load`) and operators.
//!
//! Three histograms:
//!
//! * **datagram**: from the kernel's receive timestamp of a datagram
//!   (`SO_TIMESTAMPNS` on Linux; elsewhere the moment `recv` returned) to the
//!   end of the loop iteration that handled it, when everything it caused at
//!   once (a Pong, an ack, a Welcome) has been handed to the kernel. It
//!   includes the time the datagram waited in the socket while the relay was
//!   busy — and, on loopback, the time the sender's core took to deliver it
//!   (Linux stamps a datagram when the sender queues it), which on a busy
//!   machine is not the relay's doing.
//! * **processing**: from `recv` returning the datagram to the same end: the
//!   relay's own work on it and its batch, without any wait before it.
//! * **timer**: how late the relay's timers ran (bundles at tick starts,
//!   link timers) — from when `Relay::poll_timeout` said they were due to the
//!   end of the iteration that sent what they produced.
//!
//! An order's relay-added latency is the first (it gets its tick) plus the
//! second (its bundle goes out at the tick start); the wait for the tick
//! itself is the schedule, not the relay's doing.

use std::net::{SocketAddr, UdpSocket};

/// Buckets of 10 µs up to 100 ms; the last bucket holds everything above.
const BUCKET_US: u64 = 10;
const BUCKETS: usize = 10_000;

/// A fixed-size latency histogram (no allocation after creation).
pub struct Histogram {
    counts: Box<[u64]>,
    total: u64,
    max_us: u64,
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            total: 0,
            max_us: 0,
        }
    }

    pub fn record(&mut self, us: u64) {
        let bucket = ((us / BUCKET_US) as usize).min(BUCKETS - 1);
        self.counts[bucket] += 1;
        self.total += 1;
        self.max_us = self.max_us.max(us);
    }

    pub fn reset(&mut self) {
        self.counts.iter_mut().for_each(|c| *c = 0);
        self.total = 0;
        self.max_us = 0;
    }

    /// Upper edge of the bucket holding the `permille`-th sample, µs.
    pub fn percentile_us(&self, permille: u64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = (self.total * permille).div_ceil(1000).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return ((i as u64 + 1) * BUCKET_US).min(self.max_us);
            }
        }
        self.max_us
    }

    /// `name count N p50 A p99 B p999 C max D` (µs).
    pub fn line(&self, name: &str) -> String {
        format!(
            "{name} count {} p50_us {} p99_us {} p999_us {} max_us {}",
            self.total,
            self.percentile_us(500),
            self.percentile_us(990),
            self.percentile_us(999),
            self.max_us
        )
    }
}

/// The relay's two latency histograms.
pub struct Latency {
    pub datagram: Histogram,
    pub processing: Histogram,
    pub timer: Histogram,
}

impl Latency {
    pub fn new() -> Latency {
        Latency {
            datagram: Histogram::new(),
            processing: Histogram::new(),
            timer: Histogram::new(),
        }
    }
}

/// Wall-clock nanoseconds (the clock `SO_TIMESTAMPNS` uses).
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Ask the kernel to timestamp received datagrams (Linux; elsewhere a no-op).
pub fn enable_receive_timestamps(socket: &UdpSocket) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let on: libc::c_int = 1;
        // SAFETY: setsockopt reads one c_int we own; a failure only means
        // no kernel timestamps (the receive time is used instead).
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                &on as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = socket;
}

/// Receive one datagram: its length, source and arrival time (realtime ns:
/// the kernel's timestamp when there is one, else now).
#[cfg(target_os = "linux")]
pub fn recv_timestamped(
    socket: &UdpSocket,
    buf: &mut [u8],
) -> std::io::Result<(usize, SocketAddr, u64)> {
    use std::os::fd::AsRawFd;
    // SAFETY: every pointer handed to recvmsg points into locals that
    // outlive the call, with their true sizes; the control buffer is
    // 8-byte aligned (u64 array) as cmsghdr needs; cmsg fields are read
    // only through the CMSG_* helpers within msg_controllen.
    unsafe {
        let mut storage: libc::sockaddr_storage = std::mem::zeroed();
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        let mut control = [0u64; 8];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_name = &mut storage as *mut _ as *mut libc::c_void;
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        let n = libc::recvmsg(socket.as_raw_fd(), &mut msg, 0);
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut arrival = None;
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::timespec);
                arrival = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        let source = socket_address(&storage)
            .ok_or_else(|| std::io::Error::other("datagram from a non-IP address"))?;
        Ok((n as usize, source, arrival.unwrap_or_else(realtime_ns)))
    }
}

/// The IPv4 or IPv6 address in `storage`.
#[cfg(target_os = "linux")]
fn socket_address(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
    match i32::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a = unsafe { &*(storage as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a = unsafe { &*(storage as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(not(target_os = "linux"))]
pub fn recv_timestamped(
    socket: &UdpSocket,
    buf: &mut [u8],
) -> std::io::Result<(usize, SocketAddr, u64)> {
    let (n, source) = socket.recv_from(buf)?;
    Ok((n, source, realtime_ns()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_spread() {
        let mut h = Histogram::new();
        assert_eq!(h.percentile_us(990), 0);
        for us in 1..=1000 {
            h.record(us);
        }
        // Bucket edges: 500 lies in [500, 510).
        assert_eq!(h.percentile_us(500), 510);
        assert_eq!(h.percentile_us(980), 990);
        assert_eq!(h.percentile_us(1000), 1000, "never above the max");
        h.record(5_000_000);
        assert_eq!(h.line("x").split(' ').next_back(), Some("5000000"));
        h.reset();
        assert_eq!(
            h.line("x"),
            "x count 0 p50_us 0 p99_us 0 p999_us 0 max_us 0"
        );
    }

    #[test]
    fn loopback_datagrams_carry_an_arrival_time() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_receive_timestamps(&b);
        let before = realtime_ns();
        a.send_to(b"hi", b.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 16];
        let (n, from, at) = recv_timestamped(&b, &mut buf).unwrap();
        assert_eq!((&buf[..n], from), (&b"hi"[..], a.local_addr().unwrap()));
        assert!(at >= before.saturating_sub(1_000_000) && at <= realtime_ns());
    }
}
