//! Tickets (S10): a seat's admission to one match, issued by the lobby with
//! a secret it shares with the relay, checked by the relay.
//!
//! # Layout, ticket version 1 (42 bytes, inside the Hello datagram)
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | ticket version, `1` |
//! | 1 | 1 | seat (0–15) |
//! | 2 | 8 | match id (`u64`) |
//! | 10 | 8 | expiry, Unix seconds (`u64`): the relay refuses the ticket at or after it |
//! | 18 | 8 | nonce (`u64`), chosen by the lobby, unique per ticket |
//! | 26 | 16 | MAC: SipHash-2-4 with 128-bit output, keyed with the lobby secret, over bytes 0..26 |
//!
//! # Keys
//!
//! * **Lobby secret** (16 bytes, never all zero): shared by the lobby and the
//!   relays it uses. Whoever holds it can issue tickets.
//! * **Link secret** = SipHash-2-4-128(lobby secret, `"rungs-relay link v1"`
//!   ‖ MAC). The lobby gives it to the player with the ticket, over the
//!   lobby's own (TLS) channel; it never travels on the relay's wire. The
//!   relay recomputes it from the ticket. Every ticket has its own, so
//!   players never share a key.
//! * **Connection key** = SipHash-2-4-128(link secret,
//!   `"rungs-relay connection v1"` ‖ Hello nonce): the transport key (S8) of
//!   one connection. A reconnect (new nonce) gets a fresh key, so packets of
//!   an old connection never verify on the new one.
//!
//! The Hello is tagged with the link secret, so a Hello can only be made by
//! the ticket's holder.
//!
//! # What this protects, and what it does not
//!
//! It protects against forged tickets (no lobby secret, no valid MAC);
//! tickets altered to another seat, match or expiry (the MAC covers them);
//! an eavesdropper who copies a ticket off the wire (without the link secret
//! they can make no Hello with a new nonce and sign no packet; a replay of
//! a captured Hello is refused by the relay's admission); one
//! player signing packets as another (per-ticket keys); and old connections'
//! packets after a reconnect (per-connection keys).
//!
//! It does not protect: confidentiality (orders travel in the clear; the
//! tag authenticates, it does not encrypt); a player who hands their ticket
//! and link secret to someone else; a compromised lobby or relay (either
//! holds the lobby secret); an on-path attacker who drops or delays
//! datagrams (denial of service). SipHash-2-4 is a keyed pseudo-random
//! function designed for short inputs; with a 128-bit output and a secret
//! key it is a sound MAC for these short, fixed-size messages. It is not a
//! general-purpose cryptographic MAC for long or attacker-chosen-length data
//! (HMAC-SHA256 is); rungs uses it here because the transport already
//! depends on it and tickets are short and fixed-size.

use siphasher::sip128::{Hasher128, SipHasher24};
use std::hash::Hasher;

use crate::error::{Error, Result};
use crate::wire::cursor::{DecodeError, Reader};
use crate::wire::relay::{RejectReason, MAX_SEATS, TICKET_BYTES};

/// Ticket layout version this code issues and accepts.
pub(crate) const TICKET_VERSION: u8 = 1;
/// Bytes of the authenticated part of a ticket (before the MAC).
pub(crate) const TICKET_FIELDS_BYTES: usize = 26;
const _: () = assert!(TICKET_FIELDS_BYTES + 16 == TICKET_BYTES);

const LINK_LABEL: &[u8] = b"rungs-relay link v1";
const CONNECTION_LABEL: &[u8] = b"rungs-relay connection v1";

fn mac128(key: &[u8; 16], label: &[u8], data: &[u8]) -> [u8; 16] {
    let mut h = SipHasher24::new_with_key(key);
    h.write(label);
    h.write(data);
    h.finish128().as_bytes()
}

/// Compare without an early exit, so timing says nothing about where two
/// MACs differ.
fn same(a: &[u8; 16], b: &[u8]) -> bool {
    b.len() == 16 && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The secret a lobby shares with its relays.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct LobbySecret([u8; 16]);

impl std::fmt::Debug for LobbySecret {
    // Secrets stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LobbySecret(..)")
    }
}

impl LobbySecret {
    /// A secret from 16 bytes; an all-zero key is refused (S8).
    pub fn new(bytes: [u8; 16]) -> Result<LobbySecret> {
        if bytes == [0; 16] {
            return Err(Error::invalid_value(
                "lobby secret",
                "all zero",
                "a secret key",
            ));
        }
        Ok(LobbySecret(bytes))
    }

    /// A key for another purpose, derived from this secret and `label`
    /// (SipHash-2-4-128 keyed with the secret over the label).
    pub(crate) fn derive(&self, label: &[u8]) -> [u8; 16] {
        mac128(&self.0, label, b"")
    }

    /// A secret from 32 hex digits. A refusal does not repeat the text: it
    /// may be most of the secret.
    pub fn from_hex(text: &str) -> Result<LobbySecret> {
        let mut bytes = [0u8; 16];
        decode_hex(text.trim(), &mut bytes)
            .ok_or(Error::invalid("lobby secret", "32 hex digits"))?;
        LobbySecret::new(bytes)
    }
}

/// The per-ticket link secret (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct LinkSecret(pub [u8; 16]);

impl std::fmt::Debug for LinkSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkSecret(..)")
    }
}

impl LinkSecret {
    /// The transport key of the connection opened with Hello nonce `nonce`.
    pub fn connection_key(&self, nonce: u64) -> [u8; 16] {
        mac128(&self.0, CONNECTION_LABEL, &nonce.to_le_bytes())
    }
}

/// What a ticket says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TicketFields {
    /// The match it admits to.
    pub match_id: u64,
    /// The seat it admits.
    pub seat: u8,
    /// Refused at or after this Unix time (seconds).
    pub expires_unix_s: u64,
    /// Unique per ticket (the lobby's choice).
    pub nonce: u64,
}

/// A ticket and its link secret: what the lobby hands a player.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credentials {
    /// The ticket bytes (sent in the Hello).
    pub ticket: [u8; TICKET_BYTES],
    /// The link secret (never sent).
    pub link_secret: LinkSecret,
}

impl Credentials {
    /// Text form: `<84 hex digits of ticket>:<32 hex digits of link secret>`.
    pub fn to_text(&self) -> String {
        format!(
            "{}:{}",
            encode_hex(&self.ticket),
            encode_hex(&self.link_secret.0)
        )
    }

    /// Parse [`to_text`](Self::to_text)'s form. A refusal does not repeat
    /// the text: it holds the link secret.
    pub fn from_text(text: &str) -> Result<Credentials> {
        let (t, k) = text.trim().split_once(':').ok_or(Error::invalid(
            "credentials",
            "<ticket hex>:<link secret hex>",
        ))?;
        let mut ticket = [0u8; TICKET_BYTES];
        let mut secret = [0u8; 16];
        decode_hex(t, &mut ticket).ok_or(Error::invalid("ticket", "84 hex digits"))?;
        decode_hex(k, &mut secret).ok_or(Error::invalid("link secret", "32 hex digits"))?;
        Ok(Credentials {
            ticket,
            link_secret: LinkSecret(secret),
        })
    }

    /// The fields of the ticket, unauthenticated (a client reading its own ticket).
    pub fn fields(&self) -> Result<TicketFields> {
        parse_fields(&self.ticket)
    }
}

fn parse_fields(ticket: &[u8; TICKET_BYTES]) -> Result<TicketFields> {
    read_fields(ticket).map_err(|e| Error::malformed("relay ticket", e))
}

/// The ticket's fields in layout order, up to the tag (checked elsewhere).
fn read_fields(ticket: &[u8; TICKET_BYTES]) -> std::result::Result<TicketFields, DecodeError> {
    let mut r = Reader::new(ticket);
    let version = r.u8()?;
    if version != TICKET_VERSION {
        return Err(DecodeError::BadVersion {
            got: version,
            expected: TICKET_VERSION,
        });
    }
    let seat = r.u8()?;
    if usize::from(seat) >= MAX_SEATS {
        return Err(DecodeError::Invalid("a ticket's seat must be 0 to 15"));
    }
    Ok(TicketFields {
        seat,
        match_id: r.u64()?,
        expires_unix_s: r.u64()?,
        nonce: r.u64()?,
    })
}

/// Issue a ticket (the lobby's side).
pub fn issue(secret: &LobbySecret, fields: &TicketFields) -> Result<Credentials> {
    if usize::from(fields.seat) >= MAX_SEATS {
        return Err(Error::invalid_value("ticket seat", fields.seat, "0 to 15"));
    }
    let mut ticket = [0u8; TICKET_BYTES];
    ticket[0] = TICKET_VERSION;
    ticket[1] = fields.seat;
    ticket[2..10].copy_from_slice(&fields.match_id.to_le_bytes());
    ticket[10..18].copy_from_slice(&fields.expires_unix_s.to_le_bytes());
    ticket[18..26].copy_from_slice(&fields.nonce.to_le_bytes());
    let mac = mac128(&secret.0, b"", &ticket[..TICKET_FIELDS_BYTES]);
    ticket[TICKET_FIELDS_BYTES..].copy_from_slice(&mac);
    Ok(Credentials {
        ticket,
        link_secret: link_secret_of(secret, &mac),
    })
}

fn link_secret_of(secret: &LobbySecret, mac: &[u8; 16]) -> LinkSecret {
    LinkSecret(mac128(&secret.0, LINK_LABEL, mac))
}

/// A ticket the relay verified: its fields and link secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifiedTicket {
    /// What it says.
    pub fields: TicketFields,
    /// Its link secret, recomputed.
    pub link_secret: LinkSecret,
}

/// Check a ticket's MAC and expiry (the relay's side): `BadTicket` for a
/// wrong version, seat out of range or MAC mismatch; `Expired` at or after
/// its expiry. Costs two SipHash computations and no allocation.
pub fn verify(
    secret: &LobbySecret,
    ticket: &[u8; TICKET_BYTES],
    now_unix_s: u64,
) -> std::result::Result<VerifiedTicket, RejectReason> {
    let fields = parse_fields(ticket).map_err(|_| RejectReason::BadTicket)?;
    let mac = mac128(&secret.0, b"", &ticket[..TICKET_FIELDS_BYTES]);
    if !same(&mac, &ticket[TICKET_FIELDS_BYTES..]) {
        return Err(RejectReason::BadTicket);
    }
    if now_unix_s >= fields.expires_unix_s {
        return Err(RejectReason::Expired);
    }
    Ok(VerifiedTicket {
        fields,
        link_secret: link_secret_of(secret, &mac),
    })
}

/// Lower-case hex of `bytes`.
pub(crate) fn encode_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Fill `out` from exactly `2 * out.len()` hex digits.
pub(crate) fn decode_hex(text: &str, out: &mut [u8]) -> Option<()> {
    let digits = text.as_bytes();
    if digits.len() != 2 * out.len() {
        return None;
    }
    let nibble = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    for (o, pair) in out.iter_mut().zip(digits.chunks(2)) {
        *o = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> LobbySecret {
        LobbySecret::new(*b"lobby-secret-001").unwrap()
    }

    fn fields() -> TicketFields {
        TicketFields {
            match_id: 0x1122_3344_5566_7788,
            seat: 3,
            expires_unix_s: 2_000_000_000,
            nonce: 42,
        }
    }

    #[test]
    fn layout_is_as_documented() {
        let c = issue(&secret(), &fields()).unwrap();
        assert_eq!(c.ticket[0], 1);
        assert_eq!(c.ticket[1], 3);
        assert_eq!(&c.ticket[2..10], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(&c.ticket[10..18], &2_000_000_000u64.to_le_bytes());
        assert_eq!(&c.ticket[18..26], &42u64.to_le_bytes());
        assert_eq!(c.fields().unwrap(), fields());
    }

    #[test]
    fn verify_accepts_good_and_names_what_is_wrong() {
        let c = issue(&secret(), &fields()).unwrap();
        let v = verify(&secret(), &c.ticket, 1_900_000_000).unwrap();
        assert_eq!(v.fields, fields());
        assert_eq!(v.link_secret, c.link_secret);
        assert_eq!(
            verify(&secret(), &c.ticket, 2_000_000_000),
            Err(RejectReason::Expired)
        );
        let other = LobbySecret::new(*b"lobby-secret-002").unwrap();
        assert_eq!(verify(&other, &c.ticket, 0), Err(RejectReason::BadTicket));
        for i in 0..TICKET_BYTES {
            let mut t = c.ticket;
            t[i] ^= 0x10;
            assert_eq!(
                verify(&secret(), &t, 0),
                Err(RejectReason::BadTicket),
                "flip at byte {i}"
            );
        }
    }

    #[test]
    fn every_ticket_and_connection_has_its_own_key() {
        let a = issue(&secret(), &fields()).unwrap();
        let b = issue(
            &secret(),
            &TicketFields {
                seat: 4,
                ..fields()
            },
        )
        .unwrap();
        let c = issue(
            &secret(),
            &TicketFields {
                nonce: 43,
                ..fields()
            },
        )
        .unwrap();
        assert_ne!(a.link_secret, b.link_secret);
        assert_ne!(a.link_secret, c.link_secret);
        assert_ne!(
            a.link_secret.connection_key(1),
            a.link_secret.connection_key(2)
        );
        assert_ne!(a.link_secret.0, a.ticket[26..]);
    }

    #[test]
    fn text_form_round_trips_and_secrets_are_checked() {
        let c = issue(&secret(), &fields()).unwrap();
        let text = c.to_text();
        assert_eq!(text.len(), 84 + 1 + 32);
        assert_eq!(Credentials::from_text(&text).unwrap(), c);
        assert!(Credentials::from_text("abc").is_err());
        assert!(Credentials::from_text(&text[1..]).is_err());
        assert!(LobbySecret::new([0; 16]).is_err());
        assert!(LobbySecret::from_hex(&"00".repeat(16)).is_err());
        assert!(LobbySecret::from_hex(&"0g".repeat(16)).is_err());
        assert_eq!(
            LobbySecret::from_hex(&encode_hex(b"lobby-secret-001")).unwrap(),
            secret()
        );
        assert!(issue(
            &secret(),
            &TicketFields {
                seat: 16,
                ..fields()
            }
        )
        .is_err());
        assert!(!format!("{:?}", secret()).contains("lobby-secret"));
    }
}
