//! Saying Hello to a sans-IO `Relay` by hand, as a scripted client or an
//! attacker would: the first Hello, the relay's Cookie, the Hello again
//! with it.

// Each test binary uses a part of it.
#![allow(dead_code)]

use std::net::SocketAddr;

use rungs_core::relay::ticket::Credentials;
use rungs_core::relay::Relay;
use rungs_core::wire::relay::{read_cookie, write_hello, Hello, COOKIE_BYTES, NO_COOKIE};

/// A Hello for `credentials` with `nonce` and `cookie`, tagged.
pub fn hello_bytes(credentials: &Credentials, nonce: u64, cookie: [u8; COOKIE_BYTES]) -> Vec<u8> {
    let mut buf = [0u8; 128];
    let len = write_hello(
        &Hello {
            nonce,
            have_horizon: 0,
            ticket: credentials.ticket,
            cookie,
        },
        &credentials.link_secret.0,
        &mut buf,
    )
    .unwrap();
    buf[..len].to_vec()
}

/// Datagrams the relay sent to others: (to, bytes).
pub type Others = Vec<(SocketAddr, Vec<u8>)>;

/// Send `hello` from `from` and take what the relay sends back to `from`
/// right away; every other datagram it had to send is returned too (to
/// deliver or drop).
pub fn exchange(
    relay: &mut Relay,
    now_us: u64,
    unix_s: u64,
    from: SocketAddr,
    hello: &[u8],
) -> (Vec<Vec<u8>>, Others) {
    let mut others = Vec::new();
    let mut buf = [0u8; 1500];
    // What was queued before is not the answer.
    while let Some((to, len)) = relay.poll_transmit(now_us, &mut buf) {
        others.push((to, buf[..len].to_vec()));
    }
    relay.handle_datagram(now_us, unix_s, from, hello);
    let mut answers = Vec::new();
    while let Some((to, len)) = relay.poll_transmit(now_us, &mut buf) {
        if to == from {
            answers.push(buf[..len].to_vec());
        } else {
            others.push((to, buf[..len].to_vec()));
        }
    }
    (answers, others)
}

/// Say Hello from `from` with `nonce` and answer the relay's Cookie: the
/// Hello that carried the cookie (what a capture off the wire holds) and
/// what the relay answered it with.
pub fn hello_with_cookie(
    relay: &mut Relay,
    now_us: u64,
    unix_s: u64,
    from: SocketAddr,
    credentials: &Credentials,
    nonce: u64,
) -> (Vec<u8>, Vec<Vec<u8>>) {
    let first = hello_bytes(credentials, nonce, NO_COOKIE);
    let (answers, _) = exchange(relay, now_us, unix_s, from, &first);
    let cookie = answers
        .iter()
        .find_map(|a| read_cookie(a).ok())
        .unwrap_or_else(|| panic!("no Cookie for {from}: {answers:?}"));
    assert_eq!(cookie.nonce, nonce);
    let hello = hello_bytes(credentials, nonce, cookie.cookie);
    let (answers, _) = exchange(relay, now_us, unix_s, from, &hello);
    (hello, answers)
}
