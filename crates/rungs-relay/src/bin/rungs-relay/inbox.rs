//! Incoming datagrams read in batches: one `recvmmsg` system call for up
//! to [`BATCH`] datagrams on Linux, each with the kernel's receive
//! timestamp (`SO_TIMESTAMPNS`); one `recv` each elsewhere. The mirror of
//! `outbox.rs`.

use std::net::{SocketAddr, UdpSocket};

use super::latency;

/// Datagrams per `recvmmsg`, handled before the relay sends what they
/// caused and runs its timers: a datagram's answers wait for the rest of
/// its batch, so a small batch bounds that wait (64 × a few µs) while still
/// amortising the loop.
pub const BATCH: usize = 64;
/// Room per datagram: anything longer is cut (and then fails validation:
/// no relay datagram is longer than 1200 bytes).
const SLOT_BYTES: usize = 2048;

/// What `recvmmsg` reads into besides the datagrams, allocated once
/// (zeroing it for every call cost more than the call's own work).
#[cfg(target_os = "linux")]
struct Headers {
    storage: Box<[libc::sockaddr_storage]>,
    control: Box<[[u64; 8]]>,
    iovecs: Box<[libc::iovec]>,
    headers: Box<[libc::mmsghdr]>,
}

/// Fixed buffers for one batch (allocated once).
pub struct Inbox {
    buffers: Box<[[u8; SLOT_BYTES]]>,
    #[cfg(target_os = "linux")]
    headers: Headers,
    /// (buffer, length, source, kernel arrival in realtime ns) of each
    /// datagram read.
    received: Vec<(usize, usize, SocketAddr, u64)>,
}

#[cfg(target_os = "linux")]
impl Headers {
    fn new() -> Headers {
        fn zeroed<T>() -> Box<[T]> {
            // SAFETY: used for sockaddr_storage, iovec and mmsghdr: plain C
            // data for which all-zero bytes are valid values.
            (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect()
        }
        Headers {
            storage: zeroed(),
            control: vec![[0u64; 8]; BATCH].into_boxed_slice(),
            iovecs: zeroed(),
            headers: zeroed(),
        }
    }
}

impl Inbox {
    pub fn new() -> Inbox {
        Inbox {
            buffers: vec![[0u8; SLOT_BYTES]; BATCH].into_boxed_slice(),
            #[cfg(target_os = "linux")]
            headers: Headers::new(),
            received: Vec::with_capacity(BATCH),
        }
    }

    /// Datagram `i` of the batch: its bytes, source and arrival time
    /// (realtime ns).
    pub fn get(&self, i: usize) -> (&[u8], SocketAddr, u64) {
        let (buffer, len, source, arrived) = self.received[i];
        (&self.buffers[buffer][..len], source, arrived)
    }

    /// Read what is waiting, up to [`BATCH`] datagrams, without blocking.
    /// Nothing waiting is not an error (the batch is empty).
    #[cfg(target_os = "linux")]
    pub fn receive(&mut self, socket: &UdpSocket) -> std::io::Result<usize> {
        use std::os::fd::AsRawFd;
        self.received.clear();
        // SAFETY: every pointer handed to recvmmsg points into buffers this
        // call owns for its whole length, with their true sizes; the
        // control buffers are 8-byte aligned (u64 arrays) as cmsghdr
        // needs; cmsg fields are read only through the CMSG_* helpers
        // within the msg_controllen the kernel wrote.
        let h = &mut self.headers;
        for i in 0..BATCH {
            h.iovecs[i] = libc::iovec {
                iov_base: self.buffers[i].as_mut_ptr() as *mut libc::c_void,
                iov_len: SLOT_BYTES,
            };
            // Every field the kernel reads, and the lengths it overwrote.
            let m = &mut h.headers[i].msg_hdr;
            m.msg_name = &mut h.storage[i] as *mut _ as *mut libc::c_void;
            m.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            m.msg_iov = &mut h.iovecs[i];
            m.msg_iovlen = 1;
            m.msg_control = h.control[i].as_mut_ptr() as *mut libc::c_void;
            m.msg_controllen = std::mem::size_of_val(&h.control[i]) as _;
        }
        unsafe {
            let n = libc::recvmmsg(
                socket.as_raw_fd(),
                h.headers.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            );
            if n < 0 {
                let e = std::io::Error::last_os_error();
                return match e.kind() {
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => Ok(0),
                    _ => Err(e),
                };
            }
            let now = latency::realtime_ns();
            for (i, header) in h.headers.iter().enumerate().take(n as usize) {
                let msg = &header.msg_hdr;
                let mut arrival = None;
                let mut cmsg = libc::CMSG_FIRSTHDR(msg);
                while !cmsg.is_null() {
                    if (*cmsg).cmsg_level == libc::SOL_SOCKET
                        && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
                    {
                        let ts = std::ptr::read_unaligned(
                            libc::CMSG_DATA(cmsg) as *const libc::timespec
                        );
                        arrival = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                    }
                    cmsg = libc::CMSG_NXTHDR(msg, cmsg);
                }
                // A datagram from a non-IP address cannot come to a UDP
                // socket; skip it rather than fail the batch.
                if let Some(source) = latency::socket_address(&h.storage[i]) {
                    let len = (header.msg_len as usize).min(SLOT_BYTES);
                    self.received.push((i, len, source, arrival.unwrap_or(now)));
                }
            }
            Ok(self.received.len())
        }
    }

    /// Elsewhere: one `recv` per datagram.
    #[cfg(not(target_os = "linux"))]
    pub fn receive(&mut self, socket: &UdpSocket) -> std::io::Result<usize> {
        self.received.clear();
        while self.received.len() < BATCH {
            let i = self.received.len();
            match latency::recv_timestamped(socket, &mut self.buffers[i]) {
                Ok((len, source, arrived)) => self.received.push((i, len, source, arrived)),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    break
                }
                Err(e) if self.received.is_empty() => return Err(e),
                Err(_) => break,
            }
        }
        Ok(self.received.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_holds_what_was_waiting_in_order_with_arrival_times() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        b.set_nonblocking(true).unwrap();
        latency::enable_receive_timestamps(&b);
        let mut inbox = Inbox::new();
        assert_eq!(inbox.receive(&b).unwrap(), 0, "nothing waiting");
        let before = latency::realtime_ns();
        for i in 0..(BATCH + 3) as u32 {
            a.send_to(&i.to_le_bytes(), b.local_addr().unwrap())
                .unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(inbox.receive(&b).unwrap(), BATCH);
        for i in 0..BATCH {
            let (bytes, from, at) = inbox.get(i);
            assert_eq!(bytes, (i as u32).to_le_bytes());
            assert_eq!(from, a.local_addr().unwrap());
            assert!(at + 1_000_000 >= before && at <= latency::realtime_ns());
        }
        assert_eq!(inbox.receive(&b).unwrap(), 3);
        assert_eq!(inbox.get(2).0, ((BATCH + 2) as u32).to_le_bytes());
    }
}
