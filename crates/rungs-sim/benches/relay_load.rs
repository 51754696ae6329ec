//! Relay load: how many 8-seat matches at 30 ticks/s one relay process
//! holds on one core, and the latency the relay adds.
//!
//! One `Relay` serves M matches of 8 human seats; 8·M real `RelayClient`s
//! talk to it through in-memory queues with 1 ms of delay, on a virtual
//! clock stepped a millisecond at a time. Each player submits a 20-byte
//! order every 15 ticks on average (120 APM) and reports a checksum every
//! 30 ticks. Only the relay's calls are timed (`handle_datagram`,
//! `handle_timeout`, `poll_transmit`), in thread CPU time (so other
//! processes on the machine do not inflate it) and in wall time: the CPU
//! time over a simulated second is the relay's share of one core, so it
//! holds `M / share` matches per core. Players join spread over one tick
//! period, as matches on a real relay start at unrelated times. The relay-added latency of a datagram is at most the time the relay
//! spends on the millisecond batch it arrives in (received, timers, every
//! answer written): its p99 over all batches is reported.
//!
//! Run: `cargo bench --bench relay_load` (or with `-- 100,250,500` to pick
//! the match counts, and `RUNGS_RELAY_LOAD_SECONDS` for the simulated
//! seconds per run, default 5). `RUNGS_RELAY_LOAD_PERSISTENT=1` turns the
//! relay's persistence on and takes its durable records in the timed part
//! (what `rungs-relay --state` adds before its journal's encoding and
//! write): the records per second and their payload bytes are printed.
//! Figures depend on the machine; run on an otherwise idle core.

use std::net::SocketAddr;
use std::time::Instant;

use rungs_core::relay::ticket::{issue, LobbySecret, TicketFields};
use rungs_core::relay::{ClientConfig, MatchSetup, Relay, RelayClient, RelayConfig};
use rungs_sim::SplitMix64;

const MS: u64 = 1000;
const SEATS: u8 = 8;

struct Player {
    client: RelayClient,
}

fn player_address(index: usize) -> SocketAddr {
    SocketAddr::from((
        [10, (index >> 16) as u8, (index >> 8) as u8, index as u8],
        5000,
    ))
}

struct Figures {
    matches: usize,
    wall_share: f64,
    cpu_share: f64,
    p50_us: u64,
    p99_us: u64,
    max_us: u64,
    datagrams_in: u64,
    datagrams_out: u64,
    turns: u64,
    records: u64,
    record_bytes: u64,
}

/// CPU time of this thread, ns (what the relay used, whatever else the
/// machine runs).
fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Datagrams in flight: (deliver at, player index, bytes).
type InFlight = Vec<(u64, usize, Vec<u8>)>;

/// What the relay sent in a batch: every datagram's bytes one after the
/// other in `bytes[..used]` (as a socket's send queue holds them), and
/// (to, length) of each.
struct Sent {
    bytes: Vec<u8>,
    used: usize,
    datagrams: Vec<(SocketAddr, usize)>,
    /// Durable records taken (persistence on), and their order bytes.
    records: u64,
    record_bytes: u64,
}

/// Everything the relay does for one millisecond: the datagrams due, its
/// timers, every datagram it sends (written straight into the send queue,
/// as the binary's outbox does).
#[inline(always)]
fn relay_batch(relay: &mut Relay, now: u64, due: &InFlight, sent: &mut Sent) {
    for (_, from, bytes) in due {
        relay.handle_datagram(now, 0, player_address(*from), bytes);
    }
    if relay.poll_timeout().is_some_and(|t| t <= now) {
        relay.handle_timeout(now);
    }
    loop {
        if sent.used + 1500 > sent.bytes.len() {
            sent.bytes.resize(2 * sent.bytes.len() + 1500, 0);
        }
        let Some((to, len)) = relay.poll_transmit(now, &mut sent.bytes[sent.used..]) else {
            break;
        };
        sent.used += len;
        sent.datagrams.push((to, len));
    }
    while relay.poll_event().is_some() {}
    while let Some((_, record)) = relay.poll_durable() {
        sent.records += 1;
        if let rungs_core::relay::DurableRecord::Entry(e) = &record {
            sent.record_bytes += e.payload.len() as u64;
        }
    }
}

/// The same, in the measured window, never inlined: what `valgrind
/// --tool=callgrind --toggle-collect=relay_load::relay_batch_measured`
/// counts is the relay's work alone (the copies out included).
#[inline(never)]
fn relay_batch_measured(relay: &mut Relay, now: u64, due: &InFlight, sent: &mut Sent) {
    relay_batch(relay, now, due, sent);
}

fn run(matches: usize, seconds: u64) -> Figures {
    let secret = LobbySecret::new(*b"load-lobby-key-1").unwrap();
    let mut config = RelayConfig::new(secret);
    config.max_connections = matches * usize::from(SEATS) + 16;
    config.persistent = std::env::var("RUNGS_RELAY_LOAD_PERSISTENT").is_ok_and(|v| v == "1");
    let (mut records, mut record_bytes) = (0u64, 0u64);
    let mut relay = Relay::new(config).unwrap();
    let relay_address: SocketAddr = "10.255.255.1:7000".parse().unwrap();
    let mut players: Vec<Player> = Vec::new();
    // Players join spread over one tick period, so matches' tick boundaries
    // are spread as they would be on a real relay.
    let mut join_at: Vec<u64> = Vec::new();
    for m in 0..matches {
        let mut setup = MatchSetup::new(m as u64 + 1, SEATS, 0xFF);
        setup.checksum_interval = 30;
        // A bundle every tick, the relay's heaviest steady load (the bare
        // clients here send no timing reports for a policy to act on).
        setup.timing_policy = None;
        relay.add_match(setup, 0).unwrap();
        for seat in 0..SEATS {
            let credentials = issue(
                &secret,
                &TicketFields {
                    match_id: m as u64 + 1,
                    seat,
                    expires_unix_s: u64::MAX,
                    nonce: (m as u64) << 8 | u64::from(seat),
                },
            )
            .unwrap();
            let index = players.len();
            let client_config =
                ClientConfig::new(credentials, relay_address, 0xC0FFEE + index as u64);
            let at = (100_000 + m as u64 * 33_333 / matches as u64) / MS * MS;
            join_at.push(at);
            players.push(Player {
                client: RelayClient::new(client_config, at).unwrap(),
            });
        }
    }
    let index_of = |a: SocketAddr| -> usize {
        let SocketAddr::V4(v4) = a else {
            return usize::MAX;
        };
        let o = v4.ip().octets();
        (usize::from(o[1]) << 16) | (usize::from(o[2]) << 8) | usize::from(o[3])
    };
    // Datagrams in flight: (deliver at, to relay?, player index, bytes).
    let mut to_relay: InFlight = Vec::new();
    let mut to_players: InFlight = Vec::new();
    let mut rng = SplitMix64::new(7);
    let mut buf = vec![0u8; 1500];
    let mut batch_us: Vec<u64> = Vec::new();
    let mut relay_ns: u128 = 0;
    let mut relay_cpu_ns: u128 = 0;
    let mut datagrams_in = 0u64;
    let mut datagrams_out = 0u64;
    let mut sent = Sent {
        bytes: vec![0; 1 << 20],
        used: 0,
        datagrams: Vec::new(),
        records: 0,
        record_bytes: 0,
    };
    let mut turns = 0u64;
    // Warm up for 2 s (everyone joins, the match starts), then measure.
    let warmup = 2_000 * MS;
    let end = warmup + seconds * 1_000 * MS;
    let mut now = 0;
    while now < end {
        now += MS;
        let measuring = now > warmup;
        // Relay batch.
        let due: InFlight = {
            let (due, later): (Vec<_>, Vec<_>) = to_relay.drain(..).partition(|d| d.0 <= now);
            to_relay = later;
            due
        };
        let t0 = Instant::now();
        let cpu0 = thread_cpu_ns();
        sent.used = 0;
        sent.datagrams.clear();
        (sent.records, sent.record_bytes) = (0, 0);
        if measuring {
            relay_batch_measured(&mut relay, now, &due, &mut sent);
        } else {
            relay_batch(&mut relay, now, &due, &mut sent);
        }
        if measuring {
            records += sent.records;
            record_bytes += sent.record_bytes;
        }
        let elapsed = t0.elapsed();
        let cpu = thread_cpu_ns() - cpu0;
        if measuring {
            relay_ns += elapsed.as_nanos();
            relay_cpu_ns += u128::from(cpu);
            batch_us.push(elapsed.as_micros() as u64);
            datagrams_in += due.len() as u64;
        }
        let mut at = 0;
        for &(to, len) in &sent.datagrams {
            let bytes = sent.bytes[at..at + len].to_vec();
            at += len;
            to_players.push((now + MS, index_of(to), bytes));
        }
        datagrams_out += sent.datagrams.len() as u64 * u64::from(measuring);
        // Clients (not timed).
        let (due, later): (Vec<_>, Vec<_>) = to_players.drain(..).partition(|d| d.0 <= now);
        to_players = later;
        for (_, to, bytes) in due {
            if let Some(p) = players.get_mut(to) {
                p.client.handle_datagram(now, relay_address, &bytes);
            }
        }
        for (i, p) in players.iter_mut().enumerate() {
            if join_at[i] > now {
                continue;
            }
            let c = &mut p.client;
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
            while c.poll_event().is_some() {}
            while let Some(turn) = c.next_turn() {
                if measuring {
                    turns += 1;
                }
                if turn.tick % 30 == 0 && turn.tick > 0 {
                    c.report_checksum(turn.tick, u64::from(turn.tick));
                }
                // 120 APM: one order every 15 ticks on average.
                if rng.chance_ppm(1_000_000 / 15) {
                    let _ = c.submit_order(&[i as u8; 20]);
                }
            }
            while let Some((_, len)) = c.poll_transmit(now, &mut buf) {
                to_relay.push((now + MS, i, buf[..len].to_vec()));
            }
        }
    }
    batch_us.sort_unstable();
    let pct = |p: usize| batch_us[(batch_us.len() - 1) * p / 100];
    Figures {
        matches,
        wall_share: relay_ns as f64 / (seconds as f64 * 1e9),
        cpu_share: relay_cpu_ns as f64 / (seconds as f64 * 1e9),
        p50_us: pct(50),
        p99_us: pct(99),
        max_us: *batch_us.last().unwrap_or(&0),
        datagrams_in,
        datagrams_out,
        turns,
        records,
        record_bytes,
    }
}

fn main() {
    let counts: Vec<usize> = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(|a| a.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 250, 500]);
    let seconds: u64 = std::env::var("RUNGS_RELAY_LOAD_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    println!(
        "relay load: 8-seat matches at 30 ticks/s, 120 APM per player, {seconds} simulated s ({} build)",
        if cfg!(debug_assertions) { "debug" } else { "release" }
    );
    println!("matches | relay CPU time (share of a core) | wall time | matches per core | batch p50 / p99 / max (us, wall) | datagrams in/s | datagrams out/s | datagrams per match-tick in / out | turns executed/s");
    for m in counts {
        let f = run(m, seconds);
        let match_ticks = (m as u64 * 30 * seconds) as f64;
        println!(
            "{:7} | {:32.3} | {:9.3} | {:16.0} | {:>8} / {:>5} / {:>6} | {:14.0} | {:15.0} | {:>15.2} / {:5.2} | {:.0}",
            f.matches,
            f.cpu_share,
            f.wall_share,
            f.matches as f64 / f.cpu_share,
            f.p50_us,
            f.p99_us,
            f.max_us,
            f.datagrams_in as f64 / seconds as f64,
            f.datagrams_out as f64 / seconds as f64,
            f.datagrams_in as f64 / match_ticks,
            f.datagrams_out as f64 / match_ticks,
            f.turns as f64 / seconds as f64
        );
        if f.records > 0 {
            println!(
                "        durable records: {:.0}/s, {:.0} order bytes/s in them",
                f.records as f64 / seconds as f64,
                f.record_bytes as f64 / seconds as f64
            );
        }
    }
}
