//! S8 backpressure at the link: a lost peer is not flooded.

use std::net::SocketAddr;

use rungs_core::link::{Endpoint, EndpointConfig, LinkConfig};
use rungs_core::wire::SessionKey;

#[test]
fn a_lost_peer_is_not_sent_the_whole_queue_on_every_timeout() {
    // The fault: 1,024 queued messages of 1 KB went out whole on every RTO,
    // 31 MB a minute to a peer that answers nothing.
    let mut e = Endpoint::new(EndpointConfig {
        session_id: 1,
        key: SessionKey([3; 16]),
        local_seat: 0,
        link: LinkConfig::default(),
    })
    .unwrap();
    e.add_peer(1, SocketAddr::from(([10, 0, 0, 2], 9)), 0)
        .unwrap();
    for _ in 0..1024 {
        e.send(1, &[0xAB; 1000]).unwrap();
    }
    let mut buf = [0u8; 1500];
    let mut bytes = 0u64;
    let mut now = 0u64;
    while now < 60_000_000 {
        e.handle_timeout(now);
        while let Some(t) = e.poll_transmit(now, &mut buf) {
            bytes += t.len as u64;
        }
        now = e.poll_timeout().unwrap_or(now + 1_000_000).max(now + 1);
    }
    // The first transmission of the queue is about 1 MB; after that only a
    // bounded batch per timeout.
    assert!(bytes < 3_000_000, "{bytes} bytes sent in a minute");
}
