//! One machine's end of the transport, sans-IO: the links to every peer,
//! keyed by seat, each bound to the peer's address (S8).
//!
//! Every datagram is validated in this order, and dropped and counted at the
//! first failure without being acted on: magic, version, length (the packet
//! prefix), session id, known sender seat, source address bound to that seat,
//! authentication tag, then the link's checks (structure, replay window,
//! acknowledgements, message numbers).
//!
//! A packet of another protocol version that comes from a peer's bound
//! address is counted on that peer's link (`DropReason::BadVersion`) and
//! reported once per version ([`Endpoint::poll_protocol_mismatch`]); from
//! any other address it is counted unattributed. Either way nothing else
//! changes: the version byte is not authenticated (`super::mismatch`).

use std::collections::VecDeque;
use std::net::SocketAddr;

use super::mismatch::{HeardVersions, Protocol, ProtocolMismatch};
use super::peer::{Link, LinkConfig, LinkIdentity};
use super::seat_index::SeatIndex;
use super::stats::{DropCounts, DropReason, LinkEvent};
use crate::error::{Error, Result};
use crate::wire::cursor::DecodeError;
use crate::wire::packet::{decode, peek, verify_tag, SessionKey, VERSION};

/// Most protocol mismatch reports an endpoint holds until polled: a caller
/// that never polls them (the C endpoint, an engine session) keeps a fixed
/// amount. A report that finds the queue full is not lost for good: its
/// version is reported when it is next heard.
pub const MAX_QUEUED_PROTOCOL_MISMATCHES: usize = 64;

/// Settings of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointConfig {
    /// The game's session id: packets of another session are dropped.
    pub session_id: u32,
    /// The session's 128-bit key, the same on every machine of the game.
    pub key: SessionKey,
    /// This machine's seat.
    pub local_seat: u8,
    /// Settings every link uses.
    pub link: LinkConfig,
}

/// A datagram [`Endpoint::poll_transmit`] wrote into the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Seat it is for.
    pub seat: u8,
    /// Where to send it.
    pub destination: SocketAddr,
    /// Its length in the buffer.
    pub len: usize,
}

#[derive(Debug)]
struct Peer {
    seat: u8,
    address: SocketAddr,
    /// This pair's key: the session key unless game setup gave one (S8).
    key: SessionKey,
    link: Link,
    /// `link.poll_timeout()` as of the link's last change: a machine asks
    /// for its next timer after every datagram, and one datagram changes
    /// one link.
    timeout: Option<u64>,
    /// Other transport versions heard from this peer's address.
    other_versions: HeardVersions,
}

impl Peer {
    fn refresh_timeout(&mut self) {
        self.timeout = self.link.poll_timeout();
    }
}

/// The links of one machine. See the module docs.
#[derive(Debug)]
pub struct Endpoint {
    config: EndpointConfig,
    /// Sorted by seat.
    peers: Vec<Peer>,
    /// Each seat's place in `peers`: every datagram and every message looks
    /// its seat up, several times.
    peer_at: SeatIndex,
    /// Drops that cannot be pinned on a known peer.
    dropped: DropCounts,
    next_transmit: usize,
    next_receive: usize,
    /// Bit per peer index: the link may have something to transmit (a
    /// message queued, an ack owed, a timer fired). Links without it are
    /// skipped by `poll_transmit`, which otherwise asks every link for every
    /// datagram.
    may_transmit: u64,
    /// Bit per peer index: the link may have liveness events queued (it
    /// handled a packet or a timer, or was handed out). A clear bit means
    /// none: `poll_event`, which a session asks after every datagram, looks
    /// only at these links, in the same order as at all of them.
    event_links: u64,
    /// This machine's connection epoch and this run's nonce (S8 restarts).
    epoch: u32,
    nonce: u32,
    /// A link was handed out mutably ([`link_mut`](Self::link_mut)): the
    /// cached timeouts may be stale until the next `handle_timeout`.
    timeouts_unknown: bool,
    /// Protocol mismatches not yet polled, at most
    /// [`MAX_QUEUED_PROTOCOL_MISMATCHES`].
    mismatches: VecDeque<ProtocolMismatch>,
}

/// `index` taken round a ring of `count` (index below `2 * count` but for
/// a ring that just shrank): no division in the common case.
fn wrap(index: usize, count: usize) -> usize {
    if index < count {
        index
    } else {
        index % count
    }
}

/// The address as compared and sent to: an IPv4-mapped IPv6 address (what a
/// dual-stack socket reports for an IPv4 peer) is the IPv4 address.
pub fn canonical_address(address: SocketAddr) -> SocketAddr {
    match address {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(v4.into(), v6.port()),
            None => address,
        },
        SocketAddr::V4(_) => address,
    }
}

impl Endpoint {
    /// An endpoint with no peers yet.
    pub fn new(config: EndpointConfig) -> Result<Endpoint> {
        config.link.validate()?;
        if config.key.is_zero() {
            return Err(Error::invalid_value(
                "key",
                "all zero",
                "a secret key shared by the game's machines",
            ));
        }
        Ok(Endpoint {
            config,
            peers: Vec::new(),
            peer_at: SeatIndex::new(),
            dropped: DropCounts::default(),
            next_transmit: 0,
            next_receive: 0,
            may_transmit: 0,
            event_links: 0,
            epoch: 1,
            nonce: super::nonce::connection_nonce(),
            timeouts_unknown: false,
            mismatches: VecDeque::new(),
        })
    }

    /// Set this machine's connection epoch (S8): a machine that restarts
    /// must use a newer one than before (serial order), so its peers reset
    /// their links instead of truncating its messages. Set it before adding
    /// peers; 0 is refused.
    pub fn set_epoch(&mut self, epoch: u32) -> Result<()> {
        self.check_run_identity(epoch, "epoch", "set the epoch before adding peers")?;
        self.epoch = epoch;
        Ok(())
    }

    /// What an epoch or a nonce must be: not 0, and set before any link
    /// exists (every link takes this run's at its start).
    fn check_run_identity(
        &self,
        value: u32,
        field: &'static str,
        if_late: &'static str,
    ) -> Result<()> {
        if value == 0 {
            return Err(Error::invalid_value(field, 0u32, "not 0"));
        }
        if !self.peers.is_empty() {
            return Err(Error::State(if_late));
        }
        Ok(())
    }

    /// This machine's connection epoch.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Set this run's connection nonce (S8), before adding peers. Every
    /// endpoint draws a random one, so a restart is seen whatever epoch the
    /// program passes; a caller that needs the same bytes on every run (a
    /// simulation) sets its own, different for every run. 0 is refused.
    pub fn set_connection_nonce(&mut self, nonce: u32) -> Result<()> {
        self.check_run_identity(
            nonce,
            "nonce",
            "set the connection nonce before adding peers",
        )?;
        self.nonce = nonce;
        Ok(())
    }

    /// This run's connection nonce.
    pub fn connection_nonce(&self) -> u32 {
        self.nonce
    }

    /// Give the link to `seat` its own key (S8 per-pair keys: both ends of
    /// the pair use the same one, and no third player knows it).
    pub fn set_link_key(&mut self, seat: u8, key: SessionKey) -> Result<()> {
        if key.is_zero() {
            return Err(Error::invalid_value("key", "all zero", "a secret key"));
        }
        let at = self.index(seat)?;
        self.peers[at].key = key;
        self.peers[at].link.set_key(key);
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> &EndpointConfig {
        &self.config
    }

    /// This machine's seat.
    pub fn local_seat(&self) -> u8 {
        self.config.local_seat
    }

    #[inline]
    fn index(&self, seat: u8) -> Result<usize> {
        // A match, not `ok_or`: that builds the error, and drops it, on
        // every lookup of the hot path.
        match self.peer_at.get(seat) {
            Some(at) => Ok(at),
            None => Err(Error::UnknownSeat(seat)),
        }
    }

    /// Rebuild `peer_at` after `peers` changed.
    fn index_peers(&mut self) {
        self.peer_at
            .rebuild(self.peers.iter().map(|peer| peer.seat));
    }

    /// Add the peer at `seat`, bound to `address`; its link starts at `now_us`.
    pub fn add_peer(&mut self, seat: u8, address: SocketAddr, now_us: u64) -> Result<()> {
        if seat == self.config.local_seat {
            return Err(Error::invalid_value(
                "seat",
                seat,
                "a seat other than the local seat",
            ));
        }
        let at = match self.peers.binary_search_by_key(&seat, |p| p.seat) {
            Ok(_) => return Err(Error::State("that seat already has a peer")),
            Err(at) => at,
        };
        let identity = LinkIdentity {
            session_id: self.config.session_id,
            key: self.config.key,
            local_seat: self.config.local_seat,
            peer_seat: seat,
        };
        let mut link = Link::new(self.config.link, identity, now_us)?;
        link.set_local_epoch(self.epoch)?;
        link.set_local_nonce(self.nonce)?;
        self.may_transmit = u64::MAX; // indices shift
        self.event_links = u64::MAX;
        let timeout = link.poll_timeout();
        self.peers.insert(
            at,
            Peer {
                seat,
                address: canonical_address(address),
                key: self.config.key,
                link,
                timeout,
                other_versions: HeardVersions::default(),
            },
        );
        self.index_peers();
        Ok(())
    }

    /// Bind `seat` to a new address (the engine learned the peer moved).
    pub fn set_peer_address(&mut self, seat: u8, address: SocketAddr) -> Result<()> {
        let at = self.index(seat)?;
        self.peers[at].address = canonical_address(address);
        Ok(())
    }

    /// Drop the peer at `seat` and its link (the engine's decision, e.g. after
    /// it executed a removal event; the transport never removes anyone).
    pub fn remove_peer(&mut self, seat: u8) -> Result<()> {
        let at = self.index(seat)?;
        self.peers.remove(at);
        self.index_peers();
        self.may_transmit = u64::MAX; // indices shift
        self.event_links = u64::MAX;
        Ok(())
    }

    /// The seats with a peer, in order, and their addresses.
    pub fn peers(&self) -> impl Iterator<Item = (u8, SocketAddr)> + '_ {
        self.peers.iter().map(|p| (p.seat, p.address))
    }

    /// The link to `seat`.
    pub fn link(&self, seat: u8) -> Option<&Link> {
        self.index(seat).ok().map(|at| &self.peers[at].link)
    }

    /// The link to `seat`, mutably.
    pub fn link_mut(&mut self, seat: u8) -> Option<&mut Link> {
        let at = self.index(seat).ok()?;
        self.timeouts_unknown = true;
        self.mark_events(at);
        Some(&mut self.peers[at].link)
    }

    /// Queue a message to `seat` (see [`Link::send`]).
    pub fn send(&mut self, seat: u8, payload: &[u8]) -> Result<u64> {
        let at = self.index(seat)?;
        self.mark(at);
        let peer = &mut self.peers[at];
        let sent = peer.link.send(payload);
        peer.refresh_timeout();
        sent
    }

    fn mark(&mut self, at: usize) {
        if at < 64 {
            self.may_transmit |= 1 << at;
        }
    }

    /// Note that link `at` may have queued events.
    fn mark_events(&mut self, at: usize) {
        if at < 64 {
            self.event_links |= 1 << at;
        }
    }

    /// Validate and act on one datagram from `source`: the seat it came from,
    /// or why it was dropped (already counted).
    pub fn handle_datagram(
        &mut self,
        now_us: u64,
        source: SocketAddr,
        datagram: &[u8],
    ) -> std::result::Result<u8, DropReason> {
        let prefix = match peek(datagram) {
            Ok(prefix) => prefix,
            Err(DecodeError::BadVersion { got, .. }) => {
                return Err(self.drop_other_version(now_us, source, got))
            }
            Err(e) => return Err(self.drop_unattributed(e.into())),
        };
        if prefix.session_id != self.config.session_id {
            return Err(self.drop_unattributed(DropReason::WrongSession));
        }
        let Ok(at) = self.index(prefix.sender) else {
            return Err(self.drop_unattributed(DropReason::UnknownSender));
        };
        let local_seat = self.config.local_seat;
        let peer = &mut self.peers[at];
        // A packet from another address is a move (NAT rebinding) only if it
        // is authentic and the newest from the peer; anything else from
        // there is spoofed (S8).
        // `peer.address` is canonical: the source as it came is compared
        // first, and only one that differs is made canonical (most of an
        // IPv6 address copied per datagram otherwise).
        let moved = source != peer.address && canonical_address(source) != peer.address;
        if !verify_tag(datagram, &peer.key, local_seat) {
            let reason = if moved {
                DropReason::SpoofedAddress
            } else {
                DropReason::BadTag
            };
            peer.link.count_drop(reason);
            return Err(reason);
        }
        let packet = match decode(datagram) {
            Ok(packet) => packet,
            Err(e) => {
                let reason = e.into();
                peer.link.count_drop(reason);
                return Err(reason);
            }
        };
        // A new run of the peer (a newer epoch, or another nonce): it
        // restarted. Start the link over, then take the packet as the new
        // connection's (S8).
        let header = &packet.header;
        let restarted = peer.link.is_new_run(header.epoch, header.nonce);
        if restarted && (header.peer_nonce == 0 || header.peer_nonce == self.nonce) {
            peer.link
                .reset_for_restart(now_us, header.epoch, header.nonce);
        } else if moved && !peer.link.is_newest(packet.header.packet_number) {
            peer.link.count_drop(DropReason::SpoofedAddress);
            return Err(DropReason::SpoofedAddress);
        }
        let handled = peer.link.handle_packet(now_us, &packet, datagram.len());
        peer.refresh_timeout();
        // A restart or a packet after a loss queues an event.
        self.mark_events(at);
        let peer = &mut self.peers[at];
        handled?;
        if moved {
            peer.address = canonical_address(source);
            peer.link.note_address_change();
        }
        let seat = peer.seat;
        self.mark(at);
        Ok(seat)
    }

    fn drop_unattributed(&mut self, reason: DropReason) -> DropReason {
        self.dropped.count(reason);
        reason
    }

    /// A packet of transport version `version` from `source`: counted, on
    /// the link of the peer bound to that address if there is one, and
    /// reported the first time that peer's address sends that version.
    /// Nothing else changes (the version byte is unauthenticated): work is
    /// one pass over the peers, memory the fixed [`HeardVersions`] and the
    /// bounded queue.
    fn drop_other_version(&mut self, now_us: u64, source: SocketAddr, version: u8) -> DropReason {
        let reason = DropReason::BadVersion;
        let source = canonical_address(source);
        let Some(peer) = self.peers.iter_mut().find(|p| p.address == source) else {
            return self.drop_unattributed(reason);
        };
        peer.link.count_drop(reason);
        if peer.other_versions.note(version, now_us) {
            if self.mismatches.len() < MAX_QUEUED_PROTOCOL_MISMATCHES {
                self.mismatches.push_back(ProtocolMismatch {
                    seat: peer.seat,
                    protocol: Protocol::Wire,
                    theirs: version,
                    ours: VERSION,
                });
            } else {
                peer.other_versions.forget(version);
            }
        }
        reason
    }

    /// The next report of a peer's address sending packets of another
    /// transport version: each (peer, version) once, in the order heard.
    /// Informative only (the version byte is not authenticated; the module
    /// docs): the packets were dropped and counted, and nothing changed.
    pub fn poll_protocol_mismatch(&mut self) -> Option<ProtocolMismatch> {
        self.mismatches.pop_front()
    }

    /// The latest other transport version heard from `seat`'s address,
    /// if it was heard at or after the last valid packet of that link (or
    /// the link never had one): then the peer's silence is likely that
    /// mismatch, and a caller reporting the silence names it.
    pub fn silence_explained_by_mismatch(&self, seat: u8) -> Option<ProtocolMismatch> {
        let peer = &self.peers[self.index(seat).ok()?];
        let (theirs, heard_us) = peer.other_versions.latest()?;
        peer.link
            .last_heard_us()
            .map_or(true, |valid| valid <= heard_us)
            .then_some(ProtocolMismatch {
                seat,
                protocol: Protocol::Wire,
                theirs,
                ours: VERSION,
            })
    }

    /// Fire due timers of every link (see [`Link::handle_timeout`]). Only
    /// links whose cached timer is due are touched: for the others
    /// `Link::handle_timeout` would change nothing and `poll_transmit` would
    /// find nothing to send (their owed acks and keep-alives are timers too),
    /// and a machine runs this every frame for every link.
    pub fn handle_timeout(&mut self, now_us: u64) {
        let every_link = self.timeouts_unknown;
        let mut due = 0u64;
        for (at, peer) in self.peers.iter_mut().enumerate() {
            if !every_link && peer.timeout.map_or(true, |t| t > now_us) {
                continue;
            }
            peer.link.handle_timeout(now_us);
            peer.refresh_timeout();
            due |= if at < 64 { 1 << at } else { 0 };
        }
        self.timeouts_unknown = false;
        self.may_transmit |= due; // a timer may have made work
        self.event_links |= due; // or a loss
    }

    /// The earliest timer of any link.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.timeouts_unknown {
            return self
                .peers
                .iter()
                .filter_map(|p| p.link.poll_timeout())
                .min();
        }
        // Branch-free over the cached timers: a machine asks after every
        // datagram.
        let mut earliest = u64::MAX;
        let mut any = false;
        for peer in &self.peers {
            any |= peer.timeout.is_some();
            earliest = earliest.min(peer.timeout.unwrap_or(u64::MAX));
        }
        any.then_some(earliest)
    }

    /// Write the next datagram to send into `buf`, taking links in turn; call
    /// until `None`. Only links with something to do are asked: a message
    /// queued, an ack owed, or a timer — timers fire through
    /// [`handle_timeout`](Self::handle_timeout), which the caller runs when
    /// [`poll_timeout`](Self::poll_timeout) says.
    pub fn poll_transmit(&mut self, now_us: u64, buf: &mut [u8]) -> Option<Transmit> {
        let count = self.peers.len();
        if count == 0 {
            return None;
        }
        let start = wrap(self.next_transmit, count);
        if count <= 64 {
            // The marked links in turn from `start`: walk the set bits (a
            // machine asks after every datagram, most links unmarked).
            let live = u64::MAX >> (64 - count);
            let pending = self.may_transmit & live;
            let before_start = (1u64 << start) - 1;
            for mut marked in [pending & !before_start, pending & before_start] {
                while marked != 0 {
                    let at = marked.trailing_zeros() as usize;
                    marked &= marked - 1;
                    if let Some(transmit) = self.transmit_from(at, now_us, buf) {
                        return Some(transmit);
                    }
                }
            }
            return None;
        }
        for step in 0..count {
            let at = wrap(start + step, count);
            if at < 64 && self.may_transmit & (1 << at) == 0 {
                continue;
            }
            if let Some(transmit) = self.transmit_from(at, now_us, buf) {
                return Some(transmit);
            }
        }
        None
    }

    /// [`poll_transmit`](Self::poll_transmit) of the link at `at`; a link
    /// with nothing to send loses its mark.
    fn transmit_from(&mut self, at: usize, now_us: u64, buf: &mut [u8]) -> Option<Transmit> {
        let count = self.peers.len();
        let peer = &mut self.peers[at];
        // The cached timer is exact unless a link was handed out: when
        // it is not due, the link's timers would change nothing.
        let timer_due = self.timeouts_unknown || peer.timeout.is_some_and(|t| t <= now_us);
        let sent = if timer_due {
            if at < 64 {
                self.event_links |= 1 << at; // its timers may report a loss
            }
            peer.link.poll_transmit(now_us, buf)
        } else {
            peer.link.poll_transmit_no_timer_due(now_us, buf)
        };
        // Nothing sent and no timer due: the link did not change.
        if sent.is_some() || timer_due {
            peer.refresh_timeout();
        }
        let Some(len) = sent else {
            if at < 64 {
                self.may_transmit &= !(1 << at);
            }
            return None;
        };
        // Asked again at once, a link with no timer due and nothing else
        // to send would say so and change nothing: unmark it now.
        let timer_due = self.timeouts_unknown || peer.timeout.is_some_and(|t| t <= now_us);
        if at < 64 && !timer_due && !peer.link.may_transmit_now(now_us) {
            self.may_transmit &= !(1 << at);
        }
        self.next_transmit = wrap(at + 1, count);
        Some(Transmit {
            seat: peer.seat,
            destination: peer.address,
            len,
        })
    }

    /// The next delivered message from any peer, taking seats in turn.
    pub fn recv(&mut self) -> Option<(u8, Vec<u8>)> {
        let count = self.peers.len();
        for step in 0..count {
            let at = wrap(self.next_receive + step, count);
            let peer = &mut self.peers[at];
            if let Some(message) = peer.link.recv() {
                self.next_receive = wrap(at + 1, count);
                return Some((peer.seat, message));
            }
        }
        None
    }

    /// Copy the next delivered message from any peer (seats in turn) into
    /// `buf`: its seat and length, or `None` when none is waiting. When `buf`
    /// is too small the message stays queued and
    /// `Error::BufferTooSmall { needed }` says how much room it needs.
    pub fn recv_into(&mut self, buf: &mut [u8]) -> Result<Option<(u8, usize)>> {
        let count = self.peers.len();
        for step in 0..count {
            let at = wrap(self.next_receive + step, count);
            let Some(len) = self.peers[at].link.next_message_len() else {
                continue;
            };
            if len > buf.len() {
                return Err(Error::BufferTooSmall { needed: len });
            }
            let peer = &mut self.peers[at];
            let len = peer.link.recv_into(buf).unwrap_or(0);
            self.next_receive = wrap(at + 1, count);
            return Ok(Some((peer.seat, len)));
        }
        Ok(None)
    }

    /// Copy the next delivered message from `seat` into `buf`: its length,
    /// or `None` when none is waiting; `Error::BufferTooSmall` as for
    /// [`recv_into`](Self::recv_into). For a caller that knows which link a
    /// datagram just filled.
    pub fn recv_from_into(&mut self, seat: u8, buf: &mut [u8]) -> Result<Option<usize>> {
        let at = self.index(seat)?;
        let link = &mut self.peers[at].link;
        let Some(len) = link.next_message_len() else {
            return Ok(None);
        };
        if len > buf.len() {
            return Err(Error::BufferTooSmall { needed: len });
        }
        Ok(link.recv_into(buf))
    }

    /// The next delivered message from `seat`.
    pub fn recv_from(&mut self, seat: u8) -> Result<Option<Vec<u8>>> {
        let at = self.index(seat)?;
        Ok(self.peers[at].link.recv())
    }

    /// [`poll_event`](Self::poll_event) with what explains the event: for a
    /// `Lost`, the other transport version heard from that seat's address
    /// when that is likely why it fell silent
    /// ([`silence_explained_by_mismatch`](Self::silence_explained_by_mismatch)),
    /// for a caller to report just before the loss.
    pub fn poll_event_explained(&mut self) -> Option<(u8, LinkEvent, Option<ProtocolMismatch>)> {
        let (seat, event) = self.poll_event()?;
        let cause = if event == LinkEvent::Lost {
            self.silence_explained_by_mismatch(seat)
        } else {
            None
        };
        Some((seat, event, cause))
    }

    /// The next liveness event of any link.
    pub fn poll_event(&mut self) -> Option<(u8, LinkEvent)> {
        // The marked links among the first 64, lowest index first, then
        // every link past them.
        let mut marked = self.event_links;
        while marked != 0 {
            let at = marked.trailing_zeros() as usize;
            marked &= marked - 1;
            let Some(peer) = self.peers.get_mut(at) else {
                break; // bits past the last peer
            };
            match peer.link.poll_event() {
                Some(event) => return Some((peer.seat, event)),
                None => self.event_links &= !(1 << at),
            }
        }
        self.peers
            .iter_mut()
            .skip(64)
            .find_map(|p| p.link.poll_event().map(|event| (p.seat, event)))
    }

    /// Drops not pinned on a peer: bad length, magic, session, unknown
    /// sender, and another version from an address no peer is bound to.
    pub fn unattributed_drops(&self) -> &DropCounts {
        &self.dropped
    }

    /// Every drop: unattributed ones plus every link's.
    pub fn total_drops(&self) -> DropCounts {
        let mut total = self.dropped;
        for peer in &self.peers {
            total.add(peer.link.dropped());
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV6};

    #[test]
    fn ipv4_mapped_addresses_compare_as_ipv4() {
        let v4: SocketAddr = "192.0.2.1:4000".parse().unwrap();
        let mapped = SocketAddr::V6(SocketAddrV6::new(
            Ipv4Addr::new(192, 0, 2, 1).to_ipv6_mapped(),
            4000,
            0,
            0,
        ));
        assert_eq!(canonical_address(mapped), v4);
        let v6 = SocketAddr::new(Ipv6Addr::LOCALHOST.into(), 1);
        assert_eq!(canonical_address(v6), v6);
    }

    #[test]
    fn peers_are_kept_by_seat() {
        let mut e = Endpoint::new(EndpointConfig {
            session_id: 1,
            key: SessionKey([1; 16]),
            local_seat: 2,
            link: LinkConfig::default(),
        })
        .unwrap();
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert_eq!(
            e.add_peer(2, addr, 0),
            Err(Error::invalid_value(
                "seat",
                2u8,
                "a seat other than the local seat"
            ))
        );
        e.add_peer(5, addr, 0).unwrap();
        e.add_peer(0, addr, 0).unwrap();
        assert_eq!(
            e.add_peer(5, addr, 0),
            Err(Error::State("that seat already has a peer"))
        );
        assert_eq!(e.peers().map(|(s, _)| s).collect::<Vec<_>>(), vec![0, 5]);
        assert_eq!(e.send(7, b"x"), Err(Error::UnknownSeat(7)));
        e.remove_peer(0).unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(e.recv_into(&mut buf), Ok(None));
        assert_eq!(e.remove_peer(0), Err(Error::UnknownSeat(0)));
        assert!(e.link(5).is_some());
    }
}
