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

/// How the serving loop went: its iterations and the datagrams they
/// carried (batching shows as datagrams per iteration).
#[derive(Debug, Default)]
pub struct Loops {
    pub iterations: u64,
    pub datagrams_in: u64,
    pub datagrams_out: u64,
}

impl Loops {
    /// `loops iterations N in M out K`.
    pub fn line(&self) -> String {
        format!(
            "loops iterations {} in {} out {}",
            self.iterations, self.datagrams_in, self.datagrams_out
        )
    }
}

/// The relay's latency histograms, and its loop's batching.
pub struct Latency {
    pub datagram: Histogram,
    pub processing: Histogram,
    pub timer: Histogram,
    pub loops: Loops,
}

impl Latency {
    pub fn new() -> Latency {
        Latency {
            datagram: Histogram::new(),
            processing: Histogram::new(),
            timer: Histogram::new(),
            loops: Loops::default(),
        }
    }

    /// Start every figure over.
    pub fn reset(&mut self) {
        self.datagram.reset();
        self.processing.reset();
        self.timer.reset();
        self.loops = Loops::default();
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

/// The IPv4 or IPv6 address in `storage`.
#[cfg(target_os = "linux")]
pub fn socket_address(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
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

/// Receive one datagram: its length, source and arrival time (realtime ns:
/// now; Linux reads batches with the kernel's timestamps, `inbox.rs`).
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
}
