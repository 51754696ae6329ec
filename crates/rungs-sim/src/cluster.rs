//! Sans-IO endpoints wired together through a [`NetSim`], on one virtual
//! clock: what the transport tests run on, and the base of `rungs-sim`.
//!
//! The loop is event driven: it jumps to the next datagram arrival or link
//! timer, delivers, fires timers, and sends whatever each endpoint wants to
//! send at that instant (so acknowledgements go out as soon as the packet
//! that asks for one arrives).

use std::net::SocketAddr;

use super::network::{Delivery, NetSim};
use rungs_core::link::{Endpoint, LinkEvent};
use rungs_core::wire::MAX_PACKET_BYTES;

/// One simulated machine.
#[derive(Debug)]
pub struct SimHost {
    /// Its address on the simulated network.
    pub address: SocketAddr,
    /// Its endpoint.
    pub endpoint: Endpoint,
}

/// Endpoints on a simulated network. See the module docs.
#[derive(Debug)]
pub struct Cluster {
    /// The network (change its conditions between runs to make spikes).
    pub net: NetSim,
    hosts: Vec<SimHost>,
    now_us: u64,
    /// Datagrams that arrived for an address no host has.
    pub undeliverable: u64,
    /// Every link event so far: (time, host index, seat, event).
    pub events: Vec<(u64, usize, u8, LinkEvent)>,
}

impl Cluster {
    /// A cluster with no hosts, at time 0.
    pub fn new(net: NetSim) -> Cluster {
        Cluster {
            net,
            hosts: Vec::new(),
            now_us: 0,
            undeliverable: 0,
            events: Vec::new(),
        }
    }

    /// Add a host; returns its index.
    pub fn add_host(&mut self, address: SocketAddr, endpoint: Endpoint) -> usize {
        self.hosts.push(SimHost { address, endpoint });
        self.hosts.len() - 1
    }

    /// The host at `index`.
    pub fn host(&self, index: usize) -> &SimHost {
        &self.hosts[index]
    }

    /// The host at `index`, mutably (to send, receive, read stats).
    pub fn host_mut(&mut self, index: usize) -> &mut SimHost {
        &mut self.hosts[index]
    }

    /// Number of hosts.
    pub fn host_count(&self) -> usize {
        self.hosts.len()
    }

    /// The virtual clock, µs.
    pub fn now_us(&self) -> u64 {
        self.now_us
    }

    /// Send everything every host wants to send now.
    fn flush(&mut self) {
        let mut buf = [0u8; MAX_PACKET_BYTES];
        for host in &mut self.hosts {
            while let Some(t) = host.endpoint.poll_transmit(self.now_us, &mut buf) {
                self.net
                    .send(self.now_us, host.address, t.destination, &buf[..t.len]);
            }
        }
    }

    fn deliver(&mut self, delivery: Delivery) {
        match self.hosts.iter_mut().find(|h| h.address == delivery.to) {
            Some(host) => {
                // Drops are counted by the endpoint; nothing else to do here.
                let _ = host
                    .endpoint
                    .handle_datagram(self.now_us, delivery.from, &delivery.bytes);
            }
            None => self.undeliverable += 1,
        }
    }

    fn collect_events(&mut self) {
        for (index, host) in self.hosts.iter_mut().enumerate() {
            while let Some((seat, event)) = host.endpoint.poll_event() {
                self.events.push((self.now_us, index, seat, event));
            }
        }
    }

    /// Run the network and every endpoint until `until_us`, then stop with
    /// the clock there.
    pub fn run_until(&mut self, until_us: u64) {
        loop {
            self.flush();
            self.collect_events();
            let next_timer = self
                .hosts
                .iter()
                .filter_map(|h| h.endpoint.poll_timeout())
                .min();
            let next = match (self.net.next_delivery_us(), next_timer) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => a.or(b).unwrap_or(u64::MAX),
            };
            // Time always moves forward, so a timer nobody can clear (say,
            // packet numbers exhausted) cannot stall the loop.
            let next = next.max(self.now_us + 1);
            if next > until_us {
                break;
            }
            self.now_us = next;
            while let Some(delivery) = self.net.poll_delivery(self.now_us) {
                self.deliver(delivery);
            }
            for host in &mut self.hosts {
                host.endpoint.handle_timeout(self.now_us);
            }
        }
        self.now_us = self.now_us.max(until_us);
        for host in &mut self.hosts {
            host.endpoint.handle_timeout(self.now_us);
        }
        self.flush();
        self.collect_events();
    }
}
