//! A simulated datagram network on a virtual microsecond clock.
//!
//! Each datagram sent from one address to another is lost, delayed (base
//! delay plus uniform jitter, sometimes an extra reordering delay),
//! duplicated, or dropped by an outage, according to the conditions of that
//! directed pair at the time it was sent. All randomness comes from one
//! SplitMix64 stream seeded by the caller, draws happen in call order, and
//! ties in delivery time are broken by send order: the same seed and the
//! same calls give the same deliveries, bit for bit.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::SocketAddr;

use rungs_core::rng::SplitMix64;

/// How one direction of one pair behaves. Probabilities are parts per
/// million, times are microseconds; integers only, so runs are reproducible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Conditions {
    /// One-way base delay.
    pub delay_us: u64,
    /// Extra delay, uniform in `0..=jitter_us`, drawn per datagram.
    pub jitter_us: u64,
    /// Chance a datagram is lost.
    pub loss_ppm: u32,
    /// Chance a delivered datagram arrives twice (the copy has its own delay).
    pub duplicate_ppm: u32,
    /// Chance a datagram is held back by an extra `0..=reorder_extra_us`, so
    /// later ones overtake it.
    pub reorder_ppm: u32,
    /// Longest extra hold-back of a reordered datagram.
    pub reorder_extra_us: u64,
}

impl Conditions {
    /// No delay, no loss.
    pub const PERFECT: Conditions = Conditions {
        delay_us: 0,
        jitter_us: 0,
        loss_ppm: 0,
        duplicate_ppm: 0,
        reorder_ppm: 0,
        reorder_extra_us: 0,
    };

    /// Only a fixed one-way delay.
    pub fn delay_ms(ms: u64) -> Conditions {
        Conditions {
            delay_us: ms * 1000,
            ..Conditions::PERFECT
        }
    }

    /// The longest one-way trip these conditions can produce.
    pub fn max_one_way_us(&self) -> u64 {
        self.delay_us + self.jitter_us + self.reorder_extra_us
    }
}

/// A window of time in which nothing gets through between some addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outage {
    /// Sender it applies to; `None` for any.
    pub from: Option<SocketAddr>,
    /// Receiver it applies to; `None` for any.
    pub to: Option<SocketAddr>,
    /// First microsecond of the outage.
    pub start_us: u64,
    /// First microsecond after it.
    pub end_us: u64,
}

impl Outage {
    fn covers(&self, now_us: u64, from: SocketAddr, to: SocketAddr) -> bool {
        (self.start_us..self.end_us).contains(&now_us)
            && self.from.map_or(true, |a| a == from)
            && self.to.map_or(true, |a| a == to)
    }
}

/// A datagram arriving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// When it arrives.
    pub at_us: u64,
    /// Who sent it.
    pub from: SocketAddr,
    /// Who receives it.
    pub to: SocketAddr,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// What the network did, in total.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NetStats {
    /// Datagrams handed to [`NetSim::send`].
    pub sent: u64,
    /// Lost to the loss probability.
    pub lost: u64,
    /// Dropped by an outage.
    pub blacked_out: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Held back for reordering.
    pub reordered: u64,
    /// Handed out by [`NetSim::poll_delivery`].
    pub delivered: u64,
}

/// A datagram in flight: when it arrives (high 64 bits) and its send order
/// (low 64 bits, which breaks ties deterministically), as one integer so
/// the heap compares once. The heap holds only these keys; the bytes wait
/// in [`NetSim::payloads`] at their send order, in buffers that are reused.
type InFlightKey = u128;

fn in_flight_key(at_us: u64, order: u64) -> InFlightKey {
    u128::from(at_us) << 64 | u128::from(order)
}

#[derive(Debug)]
struct Payload {
    from: HostId,
    to: HostId,
    bytes: Vec<u8>,
}

/// An address the network has seen, by its position among them: the
/// callers that send many datagrams name hosts by this and skip the
/// address comparisons ([`NetSim::host_id`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostId(u32);

impl HostId {
    fn index(self) -> usize {
        self.0 as usize
    }
}

/// A datagram arriving, its hosts named by [`HostId`].
#[derive(Debug)]
pub struct Arrival {
    /// When it arrives.
    pub at_us: u64,
    /// Who sent it.
    pub from: HostId,
    /// Who receives it.
    pub to: HostId,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// [`NetSim::min_delay_from`] for every time in `from_us..until_us`.
#[derive(Debug, Clone, Copy)]
struct MinDelay {
    from_us: u64,
    until_us: u64,
    delay_us: u64,
}

/// The simulated network. See the module docs.
#[derive(Debug)]
pub struct NetSim {
    rng: SplitMix64,
    default_conditions: Conditions,
    /// Every address seen, interned: schedules are indexed by position.
    hosts: Vec<SocketAddr>,
    /// Per host: given conditions (interned by [`set_conditions`](Self::set_conditions)),
    /// rather than only named by a caller or a datagram; only these count in
    /// [`min_delay_from`](Self::min_delay_from).
    scheduled: Vec<bool>,
    /// `schedules[from][to]`: conditions from a time on, sorted by time.
    schedules: Vec<Vec<Vec<(u64, Conditions)>>>,
    outages: Vec<Outage>,
    /// The last answer of [`min_delay_from`](Self::min_delay_from) and the
    /// times it holds for: from the time asked until the next change of
    /// any schedule (parallel play asks at every window).
    min_delay: Cell<Option<MinDelay>>,
    /// Datagrams in flight whose keys came in ascending order, oldest
    /// first. Without jitter or reordering every datagram arrives after all
    /// those sent before it, so most never need the heap: appending here
    /// and popping the front is a few instructions where the heap's sift
    /// was a few hundred. A key below the last one here goes to the heap
    /// instead; the next datagram is the smaller of the two fronts, so the
    /// order delivered is the same.
    in_order: VecDeque<InFlightKey>,
    /// Datagrams in flight that arrive before one sent earlier (jitter,
    /// reordering, a shorter path).
    in_flight: BinaryHeap<Reverse<InFlightKey>>,
    /// The payload of the datagram sent `payloads_base + i`-th at `i`
    /// (`None` once delivered): datagrams arrive roughly in send order, so
    /// the front is trimmed as they go.
    payloads: VecDeque<Option<Payload>>,
    payloads_base: u64,
    spare_buffers: Vec<Vec<u8>>,
    order: u64,
    stats: NetStats,
}

impl NetSim {
    /// A network where every pair has `default_conditions` until told otherwise.
    pub fn new(seed: u64, default_conditions: Conditions) -> NetSim {
        NetSim {
            rng: SplitMix64::new(seed),
            default_conditions,
            hosts: Vec::new(),
            scheduled: Vec::new(),
            schedules: Vec::new(),
            outages: Vec::new(),
            min_delay: Cell::new(None),
            in_order: VecDeque::new(),
            in_flight: BinaryHeap::new(),
            payloads: VecDeque::new(),
            payloads_base: 0,
            spare_buffers: Vec::new(),
            order: 0,
            stats: NetStats::default(),
        }
    }

    /// The position of `address` among the hosts seen, if seen.
    fn host(&self, address: SocketAddr) -> Option<HostId> {
        let index = self.hosts.iter().position(|h| *h == address)?;
        Some(HostId(index as u32))
    }

    /// The id of `address`, interning it on first sight (as a host without
    /// conditions of its own: every datagram to or from it sees the
    /// default ones until [`set_conditions`](Self::set_conditions) names it).
    pub fn host_id(&mut self, address: SocketAddr) -> HostId {
        if let Some(id) = self.host(address) {
            return id;
        }
        self.hosts.push(address);
        self.scheduled.push(false);
        for row in &mut self.schedules {
            row.push(Vec::new());
        }
        self.schedules.push(vec![Vec::new(); self.hosts.len()]);
        HostId(self.hosts.len() as u32 - 1)
    }

    /// The position of a host among those seen (0, 1, ...), for tables
    /// indexed by host.
    pub fn host_index(&self, id: HostId) -> usize {
        id.index()
    }

    /// The address of a host.
    pub fn address_of(&self, id: HostId) -> SocketAddr {
        self.hosts[id.index()]
    }

    /// The position of `address`, interning it as a host with conditions.
    fn intern(&mut self, address: SocketAddr) -> usize {
        let id = self.host_id(address).index();
        self.scheduled[id] = true;
        id
    }

    /// From `from_us` on, datagrams from `from` to `to` see `conditions`
    /// (a spike is two calls: worse at its start, back at its end).
    pub fn set_conditions(
        &mut self,
        from: SocketAddr,
        to: SocketAddr,
        from_us: u64,
        conditions: Conditions,
    ) {
        let (from, to) = (self.intern(from), self.intern(to));
        self.min_delay.set(None);
        let schedule = &mut self.schedules[from][to];
        let at = schedule.partition_point(|(t, _)| *t <= from_us);
        schedule.insert(at, (from_us, conditions));
    }

    /// [`set_conditions`](Self::set_conditions) for both directions.
    pub fn set_path_conditions(
        &mut self,
        a: SocketAddr,
        b: SocketAddr,
        from_us: u64,
        conditions: Conditions,
    ) {
        self.set_conditions(a, b, from_us, conditions);
        self.set_conditions(b, a, from_us, conditions);
    }

    /// Add an outage.
    pub fn add_outage(&mut self, outage: Outage) {
        self.outages.push(outage);
    }

    /// The conditions a datagram from `from` to `to` sent at `now_us` sees.
    pub fn conditions(&self, from: SocketAddr, to: SocketAddr, now_us: u64) -> Conditions {
        let (Some(from), Some(to)) = (self.host(from), self.host(to)) else {
            return self.default_conditions;
        };
        self.conditions_between(from, to, now_us)
    }

    /// [`conditions`](Self::conditions) between hosts named by id.
    fn conditions_between(&self, from: HostId, to: HostId, now_us: u64) -> Conditions {
        self.schedules[from.index()][to.index()]
            .iter()
            .rev()
            .find(|(t, _)| *t <= now_us)
            .map_or(self.default_conditions, |(_, c)| *c)
    }

    /// The shortest one-way delay any datagram between two different hosts
    /// seen so far can have when sent at `from_us` or later: the smallest
    /// base delay in force then or scheduled after (jitter, reordering and
    /// outages only add or drop). A datagram sent at `t >= from_us` to one
    /// of these hosts arrives at `t +` this at the earliest.
    pub fn min_delay_from(&self, from_us: u64) -> u64 {
        if let Some(known) = self.min_delay.get() {
            if (known.from_us..known.until_us).contains(&from_us) {
                return known.delay_us;
            }
        }
        // No schedule changes before the next entry starts: the answer
        // holds until then.
        let until_us = self
            .schedules
            .iter()
            .flatten()
            .flatten()
            .map(|(t, _)| *t)
            .filter(|t| *t > from_us)
            .min()
            .unwrap_or(u64::MAX);
        let delay_us = self.work_out_min_delay_from(from_us);
        self.min_delay.set(Some(MinDelay {
            from_us,
            until_us,
            delay_us,
        }));
        delay_us
    }

    /// [`min_delay_from`](Self::min_delay_from), worked out.
    fn work_out_min_delay_from(&self, from_us: u64) -> u64 {
        let mut min = u64::MAX;
        let scheduled = |host: &usize| self.scheduled[*host];
        for (from, row) in self
            .schedules
            .iter()
            .enumerate()
            .filter(|(f, _)| scheduled(f))
        {
            let others = row
                .iter()
                .enumerate()
                .filter(|(to, _)| *to != from && scheduled(to));
            for (_, schedule) in others {
                // The entry in force at `from_us` (or the default before any)
                // and every later one.
                let later = schedule.partition_point(|(t, _)| *t <= from_us);
                let in_force = match later.checked_sub(1) {
                    Some(at) => schedule[at].1.delay_us,
                    None => self.default_conditions.delay_us,
                };
                min = schedule[later..]
                    .iter()
                    .map(|(_, c)| c.delay_us)
                    .fold(min.min(in_force), u64::min);
            }
        }
        if self.scheduled.iter().filter(|s| **s).count() < 2 {
            return self.default_conditions.delay_us;
        }
        min
    }

    /// Send a datagram at `now_us`.
    pub fn send(&mut self, now_us: u64, from: SocketAddr, to: SocketAddr, bytes: &[u8]) {
        let (from, to) = (self.host_id(from), self.host_id(to));
        self.send_copy_between(now_us, from, to, bytes);
    }

    /// [`send`](Self::send) between hosts named by id.
    pub fn send_copy_between(&mut self, now_us: u64, from: HostId, to: HostId, bytes: &[u8]) {
        let (arrivals, copies) = self.fate(now_us, from, to);
        for at_us in &arrivals[..copies] {
            let mut buffer = self.spare_buffers.pop().unwrap_or_default();
            buffer.clear();
            buffer.extend_from_slice(bytes);
            self.enqueue(*at_us, from, to, buffer);
        }
    }

    /// [`send`](Self::send) of a datagram whose buffer the network takes
    /// instead of copying it (the same draws, the same deliveries). The
    /// buffer comes back when the datagram is lost or blacked out.
    pub fn send_buffer(
        &mut self,
        now_us: u64,
        from: SocketAddr,
        to: SocketAddr,
        bytes: Vec<u8>,
    ) -> Option<Vec<u8>> {
        let (from, to) = (self.host_id(from), self.host_id(to));
        self.send_between(now_us, from, to, bytes)
    }

    /// [`send_buffer`](Self::send_buffer) between hosts named by id.
    pub fn send_between(
        &mut self,
        now_us: u64,
        from: HostId,
        to: HostId,
        bytes: Vec<u8>,
    ) -> Option<Vec<u8>> {
        let (arrivals, copies) = self.fate(now_us, from, to);
        match copies {
            0 => return Some(bytes),
            2 => self.enqueue(arrivals[0], from, to, bytes.clone()),
            _ => {}
        }
        self.enqueue(arrivals[copies - 1], from, to, bytes);
        None
    }

    /// What becomes of a datagram sent at `now_us`: the arrival time of
    /// each copy that gets through (none, one, or two when duplicated),
    /// counted in the stats. The random draws happen here, in a fixed order.
    fn fate(&mut self, now_us: u64, from: HostId, to: HostId) -> ([u64; 2], usize) {
        let mut arrivals = [0; 2];
        self.stats.sent += 1;
        let (from_address, to_address) = (self.address_of(from), self.address_of(to));
        if self
            .outages
            .iter()
            .any(|o| o.covers(now_us, from_address, to_address))
        {
            self.stats.blacked_out += 1;
            return (arrivals, 0);
        }
        let conditions = self.conditions_between(from, to, now_us);
        if self.rng.chance_ppm(conditions.loss_ppm) {
            self.stats.lost += 1;
            return (arrivals, 0);
        }
        let copies = if self.rng.chance_ppm(conditions.duplicate_ppm) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for at_us in &mut arrivals[..copies] {
            let mut delay = conditions.delay_us + self.rng.below_or_equal(conditions.jitter_us);
            if self.rng.chance_ppm(conditions.reorder_ppm) {
                self.stats.reordered += 1;
                delay += self.rng.below_or_equal(conditions.reorder_extra_us);
            }
            *at_us = now_us.saturating_add(delay);
        }
        (arrivals, copies)
    }

    /// Put a datagram in flight, after every one sent before it.
    fn enqueue(&mut self, at_us: u64, from: HostId, to: HostId, bytes: Vec<u8>) {
        self.payloads.push_back(Some(Payload { from, to, bytes }));
        let key = in_flight_key(at_us, self.order);
        if self.in_order.back().map_or(true, |last| key > *last) {
            self.in_order.push_back(key);
        } else {
            self.in_flight.push(Reverse(key));
        }
        self.order += 1;
    }

    /// The key of the next datagram to arrive, if any is in flight.
    fn next_key(&self) -> Option<InFlightKey> {
        match (self.in_order.front(), self.in_flight.peek()) {
            (Some(a), Some(Reverse(b))) => Some(*a.min(b)),
            (Some(a), None) => Some(*a),
            (None, Some(Reverse(b))) => Some(*b),
            (None, None) => None,
        }
    }

    /// When the next datagram arrives, if any is in flight.
    pub fn next_delivery_us(&self) -> Option<u64> {
        self.next_key().map(|key| (key >> 64) as u64)
    }

    /// Take the next datagram arriving at or before `now_us` out of flight:
    /// when it arrives and its payload.
    fn pop_due(&mut self, now_us: u64) -> Option<(u64, Payload)> {
        let key = self.next_key()?;
        if (key >> 64) as u64 > now_us {
            return None;
        }
        if self.in_order.front() == Some(&key) {
            self.in_order.pop_front();
        } else {
            self.in_flight.pop();
        }
        let order = key as u64;
        let payload = self
            .payloads
            .get_mut((order - self.payloads_base) as usize)?
            .take()?;
        while self.payloads.front().is_some_and(Option::is_none) {
            self.payloads.pop_front();
            self.payloads_base += 1;
        }
        self.stats.delivered += 1;
        Some(((key >> 64) as u64, payload))
    }

    /// The next datagram arriving at or before `now_us`, in arrival order.
    pub fn poll_delivery(&mut self, now_us: u64) -> Option<Delivery> {
        let arrival = self.poll_arrival(now_us)?;
        Some(Delivery {
            at_us: arrival.at_us,
            from: self.address_of(arrival.from),
            to: self.address_of(arrival.to),
            bytes: arrival.bytes,
        })
    }

    /// [`poll_delivery`](Self::poll_delivery) with the hosts named by id.
    pub fn poll_arrival(&mut self, now_us: u64) -> Option<Arrival> {
        let (at_us, payload) = self.pop_due(now_us)?;
        Some(Arrival {
            at_us,
            from: payload.from,
            to: payload.to,
            bytes: payload.bytes,
        })
    }

    /// [`poll_delivery`](Self::poll_delivery) without allocating: the bytes
    /// are swapped into `bytes` (whose old buffer the network reuses).
    /// Returns when the datagram arrives, who sent it and who receives it.
    pub fn poll_delivery_into(
        &mut self,
        now_us: u64,
        bytes: &mut Vec<u8>,
    ) -> Option<(u64, SocketAddr, SocketAddr)> {
        let (at_us, mut payload) = self.pop_due(now_us)?;
        std::mem::swap(bytes, &mut payload.bytes);
        self.spare_buffers.push(payload.bytes);
        Some((
            at_us,
            self.address_of(payload.from),
            self.address_of(payload.to),
        ))
    }

    /// Datagrams still in flight.
    pub fn in_flight(&self) -> usize {
        self.in_order.len() + self.in_flight.len()
    }

    /// What the network did so far.
    pub fn stats(&self) -> NetStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 1], port))
    }

    fn run(seed: u64) -> Vec<Delivery> {
        let mut net = NetSim::new(
            seed,
            Conditions {
                delay_us: 50_000,
                jitter_us: 10_000,
                loss_ppm: 300_000,
                duplicate_ppm: 100_000,
                reorder_ppm: 100_000,
                reorder_extra_us: 30_000,
            },
        );
        for i in 0..200u64 {
            net.send(i * 1000, addr(1), addr(2), &i.to_le_bytes());
        }
        std::iter::from_fn(|| net.poll_delivery(u64::MAX)).collect()
    }

    #[test]
    fn same_seed_same_deliveries_other_seed_other_ones() {
        let a = run(1);
        assert_eq!(a, run(1));
        assert_ne!(a, run(2));
        assert!(a.windows(2).all(|w| w[0].at_us <= w[1].at_us), "time order");
        // Roughly 30 % lost, some duplicated, some overtaken.
        assert!((110..170).contains(&a.len()), "{}", a.len());
        let sent_order: Vec<u64> = a
            .iter()
            .map(|d| u64::from_le_bytes(d.bytes[..8].try_into().unwrap()))
            .collect();
        assert!(
            sent_order.windows(2).any(|w| w[0] > w[1]),
            "some reordering"
        );
        assert!(
            sent_order.windows(2).any(|w| w[0] == w[1]),
            "some duplicates"
        );
    }

    #[test]
    fn deliveries_come_in_arrival_then_send_order_however_they_mix() {
        // One path without jitter (its datagrams arrive in send order, two
        // at each moment: a tie the send order breaks) and one with jitter
        // and reordering (its datagrams overtake), polled while sending, so
        // datagrams in order and out of it are in flight together.
        let mut net = NetSim::new(5, Conditions::delay_ms(40));
        let overtaking = Conditions {
            delay_us: 10_000,
            jitter_us: 25_000,
            loss_ppm: 0,
            duplicate_ppm: 100_000,
            reorder_ppm: 200_000,
            reorder_extra_us: 30_000,
        };
        net.set_conditions(addr(3), addr(4), 0, overtaking);
        let mut sent = 0u64;
        let mut delivered = Vec::new();
        for t in 0..300u64 {
            let now = t * 1000;
            for (from, to) in [(1, 2), (1, 2), (3, 4)] {
                net.send(now, addr(from), addr(to), &sent.to_le_bytes());
                sent += 1;
            }
            delivered.extend(std::iter::from_fn(|| net.poll_delivery(now)));
        }
        delivered.extend(std::iter::from_fn(|| net.poll_delivery(u64::MAX)));
        let keys: Vec<(u64, u64)> = delivered
            .iter()
            .map(|d| {
                (
                    d.at_us,
                    u64::from_le_bytes(d.bytes[..8].try_into().unwrap()),
                )
            })
            .collect();
        assert!(
            keys.windows(2).all(|w| w[0] <= w[1]),
            "arrival, then send order"
        );
        assert!(keys.windows(2).any(|w| w[0].0 == w[1].0), "some ties");
        assert!(keys.windows(2).any(|w| w[0].1 > w[1].1), "some overtaking");
        assert_eq!(net.in_flight(), 0);
        assert!(delivered.len() > 900, "{}", delivered.len());
    }

    #[test]
    fn conditions_change_over_time_per_direction() {
        let mut net = NetSim::new(0, Conditions::delay_ms(10));
        net.set_conditions(addr(1), addr(2), 1_000_000, Conditions::delay_ms(300));
        net.set_conditions(addr(1), addr(2), 2_000_000, Conditions::delay_ms(10));
        assert_eq!(net.conditions(addr(1), addr(2), 999_999).delay_us, 10_000);
        assert_eq!(
            net.conditions(addr(1), addr(2), 1_500_000).delay_us,
            300_000
        );
        assert_eq!(net.conditions(addr(2), addr(1), 1_500_000).delay_us, 10_000);
        assert_eq!(net.conditions(addr(1), addr(2), 2_000_000).delay_us, 10_000);
        net.send(1_500_000, addr(1), addr(2), b"x");
        assert_eq!(net.next_delivery_us(), Some(1_800_000));
        assert_eq!(net.poll_delivery(1_799_999), None);
        assert_eq!(net.poll_delivery(1_800_000).unwrap().bytes, b"x");
    }

    #[test]
    fn min_delay_counts_what_is_in_force_and_what_comes_later() {
        let mut net = NetSim::new(0, Conditions::PERFECT);
        net.set_path_conditions(addr(1), addr(2), 1_000, Conditions::delay_ms(80));
        net.set_conditions(addr(1), addr(2), 5_000, Conditions::delay_ms(30));
        net.set_conditions(addr(1), addr(2), 9_000, Conditions::delay_ms(90));
        // Before any schedule starts the default (no delay) is in force.
        assert_eq!(net.min_delay_from(0), 0);
        // The 30 ms stretch lies ahead, then is in force, then is past.
        assert_eq!(net.min_delay_from(1_000), 30_000);
        assert_eq!(net.min_delay_from(6_000), 30_000);
        assert_eq!(net.min_delay_from(9_000), 80_000);
        // Jitter only adds: the base delay is the bound.
        let mut jittery = Conditions::delay_ms(50);
        jittery.jitter_us = 40_000;
        net.set_conditions(addr(2), addr(1), 9_500, jittery);
        assert_eq!(net.min_delay_from(9_000), 50_000);
    }

    #[test]
    fn hosts_named_by_id_or_datagram_only_do_not_count_in_the_min_delay() {
        let mut net = NetSim::new(0, Conditions::PERFECT);
        net.set_path_conditions(addr(1), addr(2), 0, Conditions::delay_ms(40));
        assert_eq!(net.min_delay_from(0), 40_000);
        // A third address seen only as a datagram's sender and by id: the
        // default conditions, and no say in the bound.
        let stranger = net.host_id(addr(3));
        assert_eq!(net.address_of(stranger), addr(3));
        net.send(0, addr(3), addr(1), b"s");
        assert_eq!(net.min_delay_from(0), 40_000);
        let one = net.host_id(addr(1));
        let two = net.host_id(addr(2));
        assert_eq!(net.send_between(0, one, two, b"t".to_vec()), None);
        let first = net.poll_arrival(u64::MAX).unwrap();
        assert_eq!(
            (first.at_us, first.from, first.bytes),
            (0, stranger, b"s".to_vec())
        );
        let second = net.poll_delivery(u64::MAX).unwrap();
        assert_eq!(
            (second.at_us, second.from, second.to),
            (40_000, addr(1), addr(2))
        );
    }

    #[test]
    fn outages_drop_everything_inside_their_window() {
        let mut net = NetSim::new(0, Conditions::PERFECT);
        net.add_outage(Outage {
            from: None,
            to: Some(addr(2)),
            start_us: 100,
            end_us: 200,
        });
        for t in [99, 100, 199, 200] {
            net.send(t, addr(1), addr(2), b"a");
            net.send(t, addr(2), addr(1), b"b");
        }
        assert_eq!(net.stats().blacked_out, 2);
        assert_eq!(net.in_flight(), 6);
    }
}
