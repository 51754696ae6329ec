//! A lost message larger than the piggyback budget, under a steady stream
//! of small messages (a relay's bundles every tick).
//!
//! A link's retransmission timer restarts whenever newer data is
//! acknowledged (RFC 6298 5.3), so under a steady stream the timer alone
//! never fires, and piggybacking (S8, decision 17) only carries unacknowledged
//! messages that fit the budget (512 bytes by default). The relay soak found
//! the stall this caused (a 896-byte catch-up bundle lost once; relay links
//! then used a whole-packet budget as a workaround). The link now re-sends,
//! on each acknowledgement of newer data, the unacknowledged messages last
//! sent at least one RTO ago (`Link::handle_packet`), so a lost message of
//! any size is re-sent about one RTO after it went out, whatever the budget.

use rungs_core::link::{Link, LinkConfig, LinkIdentity};
use rungs_core::relay::relay_link_config;
use rungs_core::wire::packet::decode;
use rungs_core::wire::{SessionKey, MAX_PACKET_BYTES};

const MS: u64 = 1000;

/// Send one 900-byte message whose first transmission is lost, then a
/// 12-byte message every 33 ms for 9 s (then 1 s to settle) over a perfect
/// 20 ms path. Returns how many messages were sent in the first 2 s, how
/// many the receiver had delivered (in order) by 3 s, and the totals sent
/// and delivered at the end.
fn run(config: LinkConfig) -> (usize, usize, usize, usize) {
    let identity = |local, peer| LinkIdentity {
        session_id: 9,
        key: SessionKey([5; 16]),
        local_seat: local,
        peer_seat: peer,
    };
    let mut a = Link::new(config, identity(0, 1), 0).unwrap();
    let mut b = Link::new(config, identity(1, 0), 0).unwrap();
    let mut buf = [0u8; 1500];
    let mut in_flight: Vec<(u64, bool, Vec<u8>)> = Vec::new(); // (arrival, to b?, bytes)
    let mut sent = 0;
    let mut delivered = 0;
    a.send(&[0xEE; 900]).unwrap();
    sent += 1;
    let mut first = true;
    let (mut sent_by_2s, mut delivered_by_3s) = (0, 0);
    for step in 0..10_000u64 {
        let now = step * MS;
        if step == 2_000 {
            sent_by_2s = sent;
        }
        if step == 3_000 {
            delivered_by_3s = delivered;
        }
        if step % 33 == 0 && step > 0 && step < 9_000 {
            a.send(&[step as u8; 12]).unwrap();
            sent += 1;
        }
        while let Some(len) = a.poll_transmit(now, &mut buf) {
            if first {
                first = false; // the packet carrying the large message is lost
                continue;
            }
            in_flight.push((now + 20 * MS, true, buf[..len].to_vec()));
        }
        while let Some(len) = b.poll_transmit(now, &mut buf) {
            in_flight.push((now + 20 * MS, false, buf[..len].to_vec()));
        }
        let (due, later): (Vec<_>, Vec<_>) = in_flight.drain(..).partition(|d| d.0 <= now);
        in_flight = later;
        for (_, to_b, bytes) in due {
            let packet = decode(&bytes).unwrap();
            let link = if to_b { &mut b } else { &mut a };
            let _ = link.handle_packet(now, &packet, bytes.len());
        }
        while b.recv().is_some() {
            delivered += 1;
        }
    }
    (sent_by_2s, delivered_by_3s, sent, delivered)
}

fn assert_recovers(config: LinkConfig) {
    let (sent_by_2s, delivered_by_3s, sent, delivered) = run(config);
    assert!(
        delivered_by_3s >= sent_by_2s,
        "{delivered_by_3s} delivered by 3 s of {sent_by_2s} sent by 2 s"
    );
    assert_eq!(delivered, sent, "everything arrives in the end");
}

#[test]
fn default_link_config_recovers_a_lost_large_message_while_the_stream_flows() {
    assert_recovers(LinkConfig::default());
}

#[test]
fn relay_link_config_recovers_a_lost_large_message() {
    // The relay's links use the default budget again (no workaround).
    assert_eq!(
        relay_link_config().piggyback_budget_bytes,
        LinkConfig::default().piggyback_budget_bytes
    );
    assert_recovers(relay_link_config());
}

#[test]
fn no_piggybacking_at_all_still_recovers() {
    // Budget 0: only the re-send on acknowledgement recovers the message.
    assert_recovers(LinkConfig {
        piggyback_budget_bytes: 0,
        ..LinkConfig::default()
    });
}

#[test]
fn whole_packet_budget_recovers_too() {
    assert_recovers(LinkConfig {
        piggyback_budget_bytes: MAX_PACKET_BYTES,
        ..LinkConfig::default()
    });
}
