//! Outgoing datagrams gathered and sent in batches: one `sendmmsg` system
//! call for up to [`BATCH`] datagrams on Linux (the relay sends a bundle to
//! every connection at every tick, so its sends come in bursts), one
//! `send_to` each elsewhere.

use std::net::{SocketAddr, UdpSocket};

/// Datagrams per `sendmmsg`.
pub const BATCH: usize = 64;
/// Room per datagram (the relay's packets are at most 1200 bytes).
const SLOT_BYTES: usize = 1500;

/// Fixed buffers for one batch (allocated once).
pub struct Outbox {
    buffers: Box<[[u8; SLOT_BYTES]]>,
    lengths: [usize; BATCH],
    targets: Box<[socket2::SockAddr]>,
    queued: usize,
    /// What `sendmmsg` reads besides the datagrams, allocated once
    /// (zeroing it for every call cost more than filling it).
    #[cfg(target_os = "linux")]
    headers: Box<[libc::mmsghdr]>,
    #[cfg(target_os = "linux")]
    iovecs: Box<[libc::iovec]>,
}

impl Outbox {
    pub fn new() -> Outbox {
        Outbox {
            buffers: vec![[0u8; SLOT_BYTES]; BATCH].into_boxed_slice(),
            lengths: [0; BATCH],
            targets: (0..BATCH)
                .map(|_| socket2::SockAddr::from(SocketAddr::from(([0, 0, 0, 0], 0))))
                .collect(),
            queued: 0,
            // SAFETY: mmsghdr and iovec are plain C data for which all-zero
            // bytes are valid values.
            #[cfg(target_os = "linux")]
            headers: (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect(),
            #[cfg(target_os = "linux")]
            iovecs: (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect(),
        }
    }

    /// The buffer for the next datagram; `None` when the batch is full
    /// (call [`flush`](Self::flush) first).
    pub fn next_buffer(&mut self) -> Option<&mut [u8]> {
        self.buffers.get_mut(self.queued).map(|b| &mut b[..])
    }

    /// Queue what was written into [`next_buffer`](Self::next_buffer).
    pub fn commit(&mut self, to: SocketAddr, len: usize) {
        if self.queued < BATCH {
            self.lengths[self.queued] = len.min(SLOT_BYTES);
            self.targets[self.queued] = socket2::SockAddr::from(to);
            self.queued += 1;
        }
    }

    pub fn is_full(&self) -> bool {
        self.queued == BATCH
    }

    /// Datagrams queued and not yet flushed.
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// Send everything queued; the number of datagrams the kernel refused.
    pub fn flush(&mut self, socket: &UdpSocket) -> (u64, Option<std::io::Error>) {
        let (failed, error) = self.send(socket);
        self.queued = 0;
        (failed, error)
    }

    #[cfg(target_os = "linux")]
    fn send(&mut self, socket: &UdpSocket) -> (u64, Option<std::io::Error>) {
        use std::os::fd::AsRawFd;
        let n = self.queued;
        if n == 0 {
            return (0, None);
        }
        let (headers, iovecs) = (&mut self.headers, &mut self.iovecs);
        for i in 0..n {
            iovecs[i] = libc::iovec {
                iov_base: self.buffers[i].as_mut_ptr() as *mut libc::c_void,
                iov_len: self.lengths[i],
            };
            let m = &mut headers[i].msg_hdr;
            m.msg_name = self.targets[i].as_ptr() as *mut libc::c_void;
            m.msg_namelen = self.targets[i].len();
            m.msg_iov = &mut iovecs[i];
            m.msg_iovlen = 1;
        }
        let mut sent = 0;
        let mut failed = 0u64;
        let mut error = None;
        while sent < n {
            // SAFETY: headers[sent..n] point at targets, iovecs and
            // buffers that live until this function returns, with their
            // true lengths.
            let r = unsafe {
                libc::sendmmsg(
                    socket.as_raw_fd(),
                    headers[sent..].as_mut_ptr(),
                    (n - sent) as libc::c_uint,
                    0,
                )
            };
            if r > 0 {
                sent += r as usize;
            } else {
                // The datagram at `sent` was refused (e.g. an ICMP error
                // from a client that went away): skip it, send the rest.
                failed += 1;
                error = Some(std::io::Error::last_os_error());
                sent += 1;
            }
        }
        (failed, error)
    }

    #[cfg(not(target_os = "linux"))]
    fn send(&mut self, socket: &UdpSocket) -> (u64, Option<std::io::Error>) {
        let mut failed = 0;
        let mut error = None;
        for i in 0..self.queued {
            if let Some(to) = self.targets[i].as_socket() {
                if let Err(e) = socket.send_to(&self.buffers[i][..self.lengths[i]], to) {
                    failed += 1;
                    error = Some(e);
                }
            }
        }
        (failed, error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_arrives_whole_and_in_order() {
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut outbox = Outbox::new();
        for i in 0..BATCH + 6 {
            if outbox.is_full() {
                assert_eq!(outbox.flush(&sender).0, 0);
            }
            let buf = outbox.next_buffer().unwrap();
            buf[..2].copy_from_slice(&(i as u16).to_le_bytes());
            let to = if i % 2 == 0 { &a } else { &b };
            outbox.commit(to.local_addr().unwrap(), 2);
        }
        assert_eq!(outbox.flush(&sender).0, 0);
        let mut buf = [0u8; 16];
        for (socket, first) in [(&a, 0u16), (&b, 1)] {
            for k in 0..(BATCH as u16 + 6) / 2 {
                let (n, _) = socket.recv_from(&mut buf).unwrap();
                assert_eq!(n, 2);
                assert_eq!(u16::from_le_bytes([buf[0], buf[1]]), first + 2 * k);
            }
        }
    }
}
