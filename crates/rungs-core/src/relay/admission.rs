//! Who may say Hello, how often, and to whom the relay may answer (S10):
//! the return-routability cookie, the replay rule and the rate limits the
//! relay's Hello path applies before it opens a connection. Sans-IO and
//! integer arithmetic, like the rest of the relay.
//!
//! # Cookies
//!
//! A Hello without a valid cookie gets a Cookie datagram and nothing else:
//! no Welcome, no bundles, no connection. The cookie is
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | `issued_us` (`u64`): the relay clock when it was made; strictly increasing per relay |
//! | 8 | 8 | SipHash-2-4 (`u64`) keyed with the relay's cookie key over `"rungs-relay cookie v1"` ‖ `issued_us` ‖ the Hello's nonce ‖ the source address (IPv4 as 4 bytes or IPv6 as 16, then the port, all little-endian) |
//!
//! so it proves that whoever sends the next Hello receives what the relay
//! sends to that address (an attacker spoofing a victim's address never
//! sees it), for that nonce, recently (at most `cookie_lifetime_us` old).
//! It costs the relay no state: it recomputes the tag.
//!
//! # Replays
//!
//! The Hello's tag covers the cookie, so only the ticket's holder can put a
//! cookie into a Hello. A Hello opens a connection only if its cookie was
//! issued after the match was created and after the cookie of the last
//! connection the seat opened. Every Hello captured off the wire is
//! therefore refused for the ticket's whole life: from another address its
//! cookie does not verify (the replayer only gets a Cookie it cannot use
//! without the link secret), and from the same address it is either the
//! live connection's own Hello (ignored as a resend) or older than the
//! seat's last connection (`Replayed`). One `u64` per seat holds the rule,
//! however often the seat reconnects.
//!
//! # Rate limits
//!
//! * **Per address**, Hellos without a valid cookie (everything that can
//!   reach the relay from a spoofed source): a burst, then a steady rate,
//!   per IPv4 address or IPv6 /64, before any MAC is computed. Addresses
//!   are tracked in a bounded table; when it is full of active addresses,
//!   newcomers share one bucket.
//! * **Per ticket**, the connections a seat opens (Hellos with a valid
//!   cookie, which only come from an address that receives): a burst, then
//!   a steady rate. Hellos beyond it are dropped without an answer; the
//!   client's resends get in when the seat has allowance again. A flood of
//!   cookie-less Hellos with one ticket is not limited per ticket: it would
//!   let whoever captured a Hello lock the seat's owner out.
//!
//! Both limits are generic cell rate algorithm buckets: one theoretical
//! arrival time per bucket, exact integer arithmetic.

use std::collections::HashMap;
use std::hash::Hasher;
use std::net::{IpAddr, SocketAddr};

use siphasher::sip::SipHasher24;

use crate::error::{Error, Result};
use crate::wire::relay::{COOKIE_BYTES, NO_COOKIE};

const COOKIE_LABEL: &[u8] = b"rungs-relay cookie v1";

/// Addresses tracked by the per-address limit at most; beyond them,
/// newcomers share one bucket.
pub(crate) const MAX_TRACKED_ADDRESSES: usize = 16_384;

/// The relay's key for cookies: known to this relay process only.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CookieKey(pub [u8; 16]);

impl std::fmt::Debug for CookieKey {
    // Secrets stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CookieKey(..)")
    }
}

impl CookieKey {
    fn tag(&self, issued_us: u64, nonce: u64, source: SocketAddr) -> u64 {
        let mut h = SipHasher24::new_with_key(&self.0);
        h.write(COOKIE_LABEL);
        h.write(&issued_us.to_le_bytes());
        h.write(&nonce.to_le_bytes());
        match source.ip() {
            IpAddr::V4(ip) => h.write(&ip.octets()),
            IpAddr::V6(ip) => h.write(&ip.octets()),
        }
        h.write(&source.port().to_le_bytes());
        h.finish()
    }

    /// The cookie for the Hello with `nonce` from `source`, issued at
    /// `issued_us` (never all zero: `issued_us` is at least 1).
    pub fn mint(&self, issued_us: u64, nonce: u64, source: SocketAddr) -> [u8; COOKIE_BYTES] {
        let issued_us = issued_us.max(1);
        let mut cookie = NO_COOKIE;
        cookie[..8].copy_from_slice(&issued_us.to_le_bytes());
        cookie[8..].copy_from_slice(&self.tag(issued_us, nonce, source).to_le_bytes());
        cookie
    }

    /// When `cookie` was issued, if this key made it for `nonce` and
    /// `source` and it is at most `lifetime_us` old at `now_us`.
    pub fn check(
        &self,
        cookie: &[u8; COOKIE_BYTES],
        nonce: u64,
        source: SocketAddr,
        now_us: u64,
        lifetime_us: u64,
    ) -> Option<u64> {
        if *cookie == NO_COOKIE {
            return None;
        }
        let issued_us = u64::from_le_bytes(cookie[..8].try_into().ok()?);
        let tag = u64::from_le_bytes(cookie[8..].try_into().ok()?);
        let fresh = issued_us <= now_us && now_us - issued_us <= lifetime_us;
        // Constant-time is not needed: a wrong guess teaches nothing about
        // the key, and the cookie is bound to an address the guesser does
        // not receive at.
        (fresh && self.tag(issued_us, nonce, source) == tag).then_some(issued_us)
    }
}

/// How often Hellos are answered and connections opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelloLimits {
    /// Hellos without a valid cookie one address may send at once.
    pub address_burst: u32,
    /// Then one per this many microseconds.
    pub address_interval_us: u64,
    /// Connections one seat (ticket) may open at once.
    pub ticket_burst: u32,
    /// Then one per this many microseconds.
    pub ticket_interval_us: u64,
    /// How long a cookie is good for after it was issued.
    pub cookie_lifetime_us: u64,
}

impl Default for HelloLimits {
    /// Per address 32 at once, then 16 a second (eight players behind one
    /// NAT joining at once use 8, or 16 if their first Hellos are lost);
    /// per ticket 8 connections at once, then one every 2 s (a client
    /// reconnects once per lost link); cookies good for 10 s (a client
    /// answers its Cookie within one round trip).
    fn default() -> Self {
        HelloLimits {
            address_burst: 32,
            address_interval_us: 62_500,
            ticket_burst: 8,
            ticket_interval_us: 2_000_000,
            cookie_lifetime_us: 10_000_000,
        }
    }
}

impl HelloLimits {
    /// Check every field is in range.
    pub fn validate(&self) -> Result<()> {
        if self.address_burst == 0 {
            return Err(Error::invalid_value("address_burst", 0u32, "at least 1"));
        }
        if self.ticket_burst == 0 {
            return Err(Error::invalid_value("ticket_burst", 0u32, "at least 1"));
        }
        if self.address_interval_us == 0 {
            return Err(Error::invalid_value(
                "address_interval_us",
                0u64,
                "at least 1 µs",
            ));
        }
        if self.ticket_interval_us == 0 {
            return Err(Error::invalid_value(
                "ticket_interval_us",
                0u64,
                "at least 1 µs",
            ));
        }
        if !(1_000_000..=600_000_000).contains(&self.cookie_lifetime_us) {
            return Err(Error::invalid_value(
                "cookie_lifetime_us",
                self.cookie_lifetime_us,
                "1 s to 600 s",
            ));
        }
        Ok(())
    }
}

/// A generic cell rate algorithm bucket: allows `burst` events at once,
/// then one per `interval_us`. Its whole state is the theoretical arrival
/// time of the next event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RateBucket {
    next_us: u64,
}

impl RateBucket {
    /// Whether an event at `now_us` is allowed; if so, it is counted.
    pub(crate) fn allow(&mut self, now_us: u64, burst: u32, interval_us: u64) -> bool {
        let next = self.next_us.max(now_us);
        let tolerance = interval_us.saturating_mul(u64::from(burst.saturating_sub(1)));
        if next - now_us > tolerance {
            return false;
        }
        self.next_us = next.saturating_add(interval_us);
        true
    }

    /// Whether the bucket is back to its full burst at `now_us` (it need
    /// not be remembered any more).
    pub(crate) fn is_full(&self, now_us: u64) -> bool {
        self.next_us <= now_us
    }
}

/// What the per-address limit keys on: an IPv4 address, or an IPv6 /64 (a
/// host usually holds a whole /64). IPv4-mapped IPv6 addresses count as
/// IPv4.
fn address_key(source: SocketAddr) -> u128 {
    match crate::link::canonical_address(source).ip() {
        IpAddr::V4(ip) => u128::from(u32::from(ip)),
        IpAddr::V6(ip) => (u128::from(ip) >> 64) | 1 << 127,
    }
}

/// The per-address limit on Hellos without a valid cookie.
#[derive(Debug)]
pub(crate) struct AddressLimiter {
    buckets: HashMap<u128, RateBucket>,
    /// Shared by addresses that arrive while the table is full.
    overflow: RateBucket,
    last_sweep_us: Option<u64>,
}

impl Default for AddressLimiter {
    fn default() -> Self {
        AddressLimiter::new()
    }
}

impl AddressLimiter {
    /// No address seen yet.
    pub(crate) fn new() -> AddressLimiter {
        AddressLimiter {
            buckets: HashMap::new(),
            overflow: RateBucket::default(),
            last_sweep_us: None,
        }
    }

    /// Whether a Hello without a valid cookie from `source` at `now_us` may
    /// be looked at; if so, it is counted.
    pub(crate) fn allow(&mut self, source: SocketAddr, now_us: u64, limits: &HelloLimits) -> bool {
        let key = address_key(source);
        let (burst, interval) = (limits.address_burst, limits.address_interval_us);
        if let Some(bucket) = self.buckets.get_mut(&key) {
            return bucket.allow(now_us, burst, interval);
        }
        if self.buckets.len() >= MAX_TRACKED_ADDRESSES {
            self.sweep(now_us);
        }
        if self.buckets.len() >= MAX_TRACKED_ADDRESSES {
            // As many active addresses as the table holds: a storm from
            // many sources shares one allowance rather than growing memory.
            return self.overflow.allow(now_us, burst, interval);
        }
        let mut bucket = RateBucket::default();
        let allowed = bucket.allow(now_us, burst, interval);
        self.buckets.insert(key, bucket);
        allowed
    }

    /// Forget addresses whose allowance is whole again (at most once a
    /// second: the table is only swept when full).
    fn sweep(&mut self, now_us: u64) {
        if self
            .last_sweep_us
            .is_some_and(|t| now_us < t.saturating_add(1_000_000))
        {
            return;
        }
        self.last_sweep_us = Some(now_us);
        self.buckets.retain(|_, b| !b.is_full(now_us));
    }

    /// Addresses tracked now.
    #[cfg(test)]
    pub(crate) fn tracked(&self) -> usize {
        self.buckets.len()
    }
}

/// What the Hello path remembers per seat of a match.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SeatAdmission {
    /// The cookie issue time of the seat's latest connection: a Hello must
    /// carry a newer cookie to open another.
    pub latest_cookie_us: u64,
    /// The connections the seat may still open.
    pub connections: RateBucket,
}

/// Mints cookies with strictly increasing issue times, so two cookies are
/// never issued at the same instant and "newer" is always decided.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CookieClock {
    last_us: u64,
}

impl CookieClock {
    /// The issue time for a cookie made at `now_us`.
    pub(crate) fn issue(&mut self, now_us: u64) -> u64 {
        self.last_us = now_us.max(self.last_us + 1);
        self.last_us
    }

    /// The relay clock as cookies see it: `now_us`, or the last issue time
    /// when more cookies than microseconds were made.
    pub(crate) fn now(&self, now_us: u64) -> u64 {
        now_us.max(self.last_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: CookieKey = CookieKey(*b"cookie-key-00001");
    const LIFETIME: u64 = 10_000_000;

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_cookie_verifies_only_for_its_nonce_address_and_lifetime() {
        let a = addr("192.0.2.1:5000");
        let c = KEY.mint(1_000, 77, a);
        assert_ne!(c, NO_COOKIE);
        assert_eq!(&c[..8], &1_000u64.to_le_bytes());
        assert_eq!(KEY.check(&c, 77, a, 1_000, LIFETIME), Some(1_000));
        assert_eq!(
            KEY.check(&c, 77, a, 1_000 + LIFETIME, LIFETIME),
            Some(1_000)
        );
        assert_eq!(
            KEY.check(&c, 77, a, 1_001 + LIFETIME, LIFETIME),
            None,
            "stale"
        );
        assert_eq!(KEY.check(&c, 77, a, 999, LIFETIME), None, "from the future");
        assert_eq!(KEY.check(&c, 78, a, 2_000, LIFETIME), None, "other nonce");
        assert_eq!(
            KEY.check(&c, 77, addr("192.0.2.1:5001"), 2_000, LIFETIME),
            None,
            "other port"
        );
        assert_eq!(
            KEY.check(&c, 77, addr("192.0.2.2:5000"), 2_000, LIFETIME),
            None,
            "other host"
        );
        let other = CookieKey(*b"cookie-key-00002");
        assert_eq!(other.check(&c, 77, a, 2_000, LIFETIME), None, "other relay");
        assert_eq!(KEY.check(&NO_COOKIE, 77, a, 2_000, LIFETIME), None);
        for i in 0..16 {
            let mut q = c;
            q[i] ^= 1;
            assert_eq!(KEY.check(&q, 77, a, 2_000, LIFETIME), None, "flip {i}");
        }
        assert_ne!(KEY.mint(0, 77, a), NO_COOKIE, "issued at 0 is made 1");
        assert!(!format!("{KEY:?}").contains("cookie-key"));
    }

    #[test]
    fn ipv4_mapped_sources_mint_the_cookie_of_the_ipv4_address_they_are() {
        // The relay canonicalises addresses before minting; the limiter
        // keys on the canonical form itself.
        let limits = HelloLimits {
            address_burst: 1,
            ..HelloLimits::default()
        };
        let mut l = AddressLimiter::new();
        assert!(l.allow(addr("[::ffff:192.0.2.9]:1"), 0, &limits));
        assert!(!l.allow(addr("192.0.2.9:2"), 0, &limits), "same host");
        assert!(l.allow(addr("[2001:db8::1]:1"), 0, &limits));
        assert!(!l.allow(addr("[2001:db8::ffff]:9"), 0, &limits), "same /64");
        assert!(l.allow(addr("[2001:db8:0:1::1]:1"), 0, &limits));
    }

    #[test]
    fn a_bucket_allows_its_burst_then_its_rate() {
        let mut b = RateBucket::default();
        let allowed = (0..10).filter(|_| b.allow(1_000, 4, 100)).count();
        assert_eq!(allowed, 4);
        assert!(!b.allow(1_099, 4, 100));
        assert!(b.allow(1_100, 4, 100), "one more after an interval");
        assert!(!b.allow(1_100, 4, 100));
        assert!(!b.is_full(1_399));
        assert!(b.is_full(1_500));
        let allowed = (0..10).filter(|_| b.allow(10_000, 4, 100)).count();
        assert_eq!(allowed, 4, "a rested bucket has its burst again");
        // Over a long run, exactly the rate gets through.
        let mut b = RateBucket::default();
        let allowed = (0..100_000u64).filter(|t| b.allow(t * 7, 1, 70)).count();
        assert_eq!(allowed, 10_000);
    }

    #[test]
    fn the_address_table_is_bounded_and_newcomers_share_when_full() {
        let limits = HelloLimits {
            address_burst: 2,
            ..HelloLimits::default()
        };
        let mut l = AddressLimiter::new();
        for i in 0..MAX_TRACKED_ADDRESSES as u32 {
            let source = SocketAddr::from((std::net::Ipv4Addr::from(i), 1));
            assert!(l.allow(source, 0, &limits));
        }
        assert_eq!(l.tracked(), MAX_TRACKED_ADDRESSES);
        // Full of active addresses: newcomers share the overflow bucket.
        let newcomer = |n: u32| SocketAddr::from((std::net::Ipv4Addr::from(1 << 31 | n), 1));
        assert!(l.allow(newcomer(1), 10, &limits));
        assert!(l.allow(newcomer(2), 10, &limits));
        assert!(!l.allow(newcomer(3), 10, &limits));
        assert_eq!(l.tracked(), MAX_TRACKED_ADDRESSES);
        // Once their allowance is whole again, old addresses are forgotten.
        assert!(l.allow(newcomer(4), 2_000_000, &limits));
        assert_eq!(l.tracked(), 1);
    }

    #[test]
    fn cookie_issue_times_strictly_increase() {
        let mut c = CookieClock::default();
        assert_eq!(c.issue(0), 1);
        assert_eq!(c.issue(0), 2);
        assert_eq!(c.issue(100), 100);
        assert_eq!(c.issue(50), 101);
    }

    #[test]
    fn limits_are_checked() {
        assert!(HelloLimits::default().validate().is_ok());
        for bad in [
            HelloLimits {
                address_burst: 0,
                ..HelloLimits::default()
            },
            HelloLimits {
                ticket_interval_us: 0,
                ..HelloLimits::default()
            },
            HelloLimits {
                cookie_lifetime_us: 999_999,
                ..HelloLimits::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
