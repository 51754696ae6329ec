//! The load generator itself (Linux: taskset, `/proc`, `poll`, Unix-domain
//! admin socket). See `main.rs`.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::process::ExitCode;
use std::time::Instant;

use super::relay_under_test::{cpu_seconds, number, rss_kib, LaunchFlags, RelayUnderTest};

use rungs_core::relay::ticket::{issue, LobbySecret, TicketFields};
use rungs_core::relay::{ClientConfig, ClientEvent, RelayClient, SeatTurn};
use rungs_core::rng::SplitMix64;

const SECRET_HEX: &str = "6c6f61642d6c6f6262792d6b65792d31";
const SEATS: u8 = 8;
const TICKS_PER_SECOND: u64 = 30;

const HELP: &str = "\
rungs-relay-load: drive a real rungs-relay over loopback and measure it

FLAGS (default)
  --matches LIST     match counts to run, e.g. 100,250,500 (100)
  --seconds N        measured seconds per count (10)
  --warmup N         seconds before measuring (3)
  --sockets N        client UDP sockets shared by the players (64)
  --bundle-interval N  ticks per bundle (1: a bundle every tick, the
                     heaviest schedule; 2 is the adaptive policy's opening
                     timing)
  --relay PATH       the rungs-relay binary (next to this one)
  --relay-cpu N      core to pin the relay to with taskset (0)
  --load-cpu N       core to pin this process to (1)
  --no-pin           pin nothing
  --realtime         run the relay SCHED_FIFO (chrt -f 10) and this process
                     SCHED_FIFO below it (5): on a machine shared with other
                     work, so the figures are the relay's own and not the
                     scheduler's wait for a core. (At nice -20 alone this
                     process got a quarter of its core under a load average
                     of 12 and could not keep 200 matches going.)
  --relay-log PATH   keep the relay's log there (default: discarded)
";

struct Options {
    counts: Vec<usize>,
    seconds: u64,
    warmup: u64,
    sockets: usize,
    bundle_interval: u8,
    launch: LaunchFlags,
}

fn parse_options() -> Result<Options, String> {
    let mut o = Options {
        counts: vec![100],
        seconds: 10,
        warmup: 3,
        sockets: 64,
        bundle_interval: 1,
        launch: LaunchFlags::new()?,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if o.launch.take(&flag, &mut args)? {
            continue;
        }
        match flag.as_str() {
            "--matches" => {
                let v = args.next().ok_or("--matches needs a list")?;
                o.counts = v
                    .split(',')
                    .map(|n| n.parse().map_err(|_| format!("--matches: `{n}`")))
                    .collect::<Result<_, _>>()?;
            }
            "--seconds" => o.seconds = number("--seconds", args.next())?.max(1),
            "--warmup" => o.warmup = number("--warmup", args.next())?,
            "--sockets" => o.sockets = number("--sockets", args.next())?.max(1) as usize,
            "--bundle-interval" => {
                o.bundle_interval = number("--bundle-interval", args.next())?.clamp(1, 255) as u8
            }
            _ => return Err(String::new()),
        }
    }
    Ok(o)
}

struct Player {
    client: RelayClient,
    seat: u8,
    socket: usize,
    session_id: u32,
    welcomed: bool,
    /// When the client next needs a call: its timer, or 0 when a datagram
    /// arrived for it (only such clients are visited, so the generator's
    /// cost follows the traffic).
    due_us: u64,
}

#[derive(Default)]
struct Figures {
    matches: usize,
    /// Matches still running at the end (an overloaded relay loses some:
    /// their players time out, reconnect and miss the grace).
    running: u64,
    connected: usize,
    relay_cpu: f64,
    relay_rss_kib: u64,
    /// Loop iterations per second, and datagrams in and out per iteration.
    loops: (f64, f64, f64),
    load_cpu: f64,
    datagrams_in_per_s: f64,
    datagram: [u64; 4],
    processing: [u64; 4],
    timer: [u64; 4],
    order_ms: [f64; 2],
    turns_per_s: f64,
    expected_turns_per_s: f64,
    reconnects: u64,
}

fn percentile(sorted: &[u64], permille: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[(sorted.len() - 1) * permille / 1000]
}

fn run(o: &Options, matches: usize, tag: usize) -> Result<Figures, String> {
    let secret = LobbySecret::from_hex(SECRET_HEX).map_err(|e| e.to_string())?;
    let launch = o.launch.launch(SECRET_HEX);
    let max_connections = matches * usize::from(SEATS) + 64;
    // The players share a few sockets, so many are behind one address:
    // the relay is told so (its per-address Hello limit is for strangers).
    let mut relay = RelayUnderTest::start(
        &launch,
        max_connections,
        &["--address-hellos", "100000"],
        &format!("relay-load-{tag}"),
    )?;
    // No timing policy: a bundle every tick, the relay's heaviest schedule
    // (the generator's clients send no timing reports, so a policy would
    // sit on its opening timing, a bundle every second tick).
    for m in 1..=matches {
        relay.admin(&format!(
            "create {m} seats 8 humans 0,1,2,3,4,5,6,7 checksum_interval 30 load_wait_seconds 30 timing_policy off bundle_interval {}",
            o.bundle_interval
        ))?;
    }
    let sockets: Vec<UdpSocket> = (0..o.sockets.min(matches * usize::from(SEATS)))
        .map(|_| {
            let s = socket2::Socket::new(
                socket2::Domain::IPV4,
                socket2::Type::DGRAM,
                Some(socket2::Protocol::UDP),
            )?;
            let _ = s.set_recv_buffer_size(4 << 20);
            let _ = s.set_send_buffer_size(4 << 20);
            s.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())?;
            s.set_nonblocking(true)?;
            Ok(s.into())
        })
        .collect::<std::io::Result<_>>()
        .map_err(|e: std::io::Error| format!("client sockets: {e}"))?;
    let unix_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs();
    let start = Instant::now();
    let now_us = || start.elapsed().as_micros() as u64;
    let mut players = Vec::with_capacity(matches * usize::from(SEATS));
    for m in 0..matches {
        // Matches join spread over one second: their tick phases differ,
        // as on a relay whose matches started at unrelated times.
        let join_at_us = m as u64 * 1_000_000 / matches as u64;
        for seat in 0..SEATS {
            let credentials = issue(
                &secret,
                &TicketFields {
                    match_id: m as u64 + 1,
                    seat,
                    expires_unix_s: unix_now + 3600,
                    nonce: (m as u64) << 8 | u64::from(seat),
                },
            )
            .map_err(|e| e.to_string())?;
            let index = players.len();
            let config = ClientConfig::new(
                credentials,
                relay.address,
                0x5EED_0000_0000_0000 ^ ((tag as u64) << 40) ^ index as u64,
            );
            players.push(Player {
                client: RelayClient::new(config, join_at_us).map_err(|e| e.to_string())?,
                seat,
                socket: index % sockets.len(),
                session_id: 0,
                welcomed: false,
                due_us: join_at_us,
            });
        }
    }
    let mut route: HashMap<u32, usize> = HashMap::new();
    let mut rng = SplitMix64::new(0x10AD + tag as u64);
    let mut buf = vec![0u8; 2048];
    let mut order_latency_us: Vec<u64> = Vec::new();
    let mut turns = 0u64;
    let mut reconnects = 0u64;
    let mut measuring = false;
    let mut window_start = (Instant::now(), 0.0, 0u64);
    let mut load_cpu_start = 0.0;
    let warmup_us = o.warmup.max(2) * 1_000_000;
    let end_us = warmup_us + o.seconds * 1_000_000;
    let mut fds: Vec<libc::pollfd> = sockets
        .iter()
        .map(|s| libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(s),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        let now = now_us();
        if now >= end_us {
            break;
        }
        if !measuring && now >= warmup_us {
            measuring = true;
            relay.admin("latency reset")?;
            let c = relay.admin_fields("counters")?;
            let cpu = cpu_seconds(relay.child.id()).ok_or("relay CPU time unreadable")?;
            window_start = (
                Instant::now(),
                cpu,
                c.get("datagrams").copied().unwrap_or(0),
            );
            load_cpu_start = cpu_seconds(std::process::id()).unwrap_or(0.0);
        }
        // Wait up to 1 ms for anything to read.
        // SAFETY: fds is a live array of pollfd of the length given.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 1) };
        let receive_at = now_us();
        for (socket, fd) in sockets.iter().zip(fds.iter_mut()) {
            // Only the sockets with something to read (a recv each for the
            // others was most of this process's system calls).
            if std::mem::take(&mut fd.revents) == 0 {
                continue;
            }
            // At most a batch per socket per loop: a relay sending faster
            // than this process reads must not keep it reading for ever
            // while its clients' timers starve (they would take the gap for
            // a freeze and reconnect).
            for _ in 0..64 {
                let Ok((len, from)) = socket.recv_from(&mut buf) else {
                    break;
                };
                if len < 8 {
                    continue;
                }
                let id = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
                if let Some(&i) = route.get(&id) {
                    let p = &mut players[i];
                    p.client.handle_datagram(receive_at, from, &buf[..len]);
                    p.due_us = 0;
                }
            }
        }
        let now = now_us();
        for (i, p) in players.iter_mut().enumerate() {
            if p.due_us > now {
                continue;
            }
            let c = &mut p.client;
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
            while let Some(event) = c.poll_event() {
                match event {
                    ClientEvent::Welcomed { .. } => p.welcomed = true,
                    ClientEvent::ConnectionLost => {
                        p.welcomed = false;
                        reconnects += 1;
                    }
                    _ => {}
                }
            }
            while let Some(turn) = c.next_turn() {
                if measuring {
                    turns += 1;
                }
                if let Some(SeatTurn::Order(order)) = turn.seats.get(usize::from(p.seat)) {
                    if measuring && order.len() >= 8 {
                        let sent = u64::from_le_bytes(order[..8].try_into().unwrap_or([0; 8]));
                        order_latency_us.push(now.saturating_sub(sent));
                    }
                }
                if turn.tick % 30 == 0 && turn.tick > 0 {
                    c.report_checksum(turn.tick, u64::from(turn.tick));
                }
                if rng.chance_ppm(1_000_000 / 15) {
                    let mut order = [i as u8; 20];
                    order[..8].copy_from_slice(&now.to_le_bytes());
                    let _ = c.submit_order(&order);
                }
            }
            while let Some((to, len)) = c.poll_transmit(now, &mut buf) {
                let _ = sockets[p.socket].send_to(&buf[..len], to);
            }
            p.due_us = c.poll_timeout().unwrap_or(u64::MAX);
            let id = c.link().identity().session_id;
            if id != p.session_id {
                route.remove(&p.session_id);
                route.insert(id, i);
                p.session_id = id;
            }
        }
        if let Ok(Some(status)) = relay.child.try_wait() {
            return Err(format!("the relay exited: {status}"));
        }
    }
    let elapsed = window_start.0.elapsed().as_secs_f64();
    let cpu = cpu_seconds(relay.child.id()).ok_or("relay CPU time unreadable")?;
    let load_cpu = cpu_seconds(std::process::id()).unwrap_or(0.0) - load_cpu_start;
    let relay_rss_kib = rss_kib(relay.child.id()).unwrap_or(0);
    let latency = relay.admin_fields("latency")?;
    let counters = relay.admin_fields("counters")?;
    let running = counters.get("matches_running").copied().unwrap_or(0);
    relay.stop();
    order_latency_us.sort_unstable();
    let get = |k: &str| latency.get(k).copied().unwrap_or(0);
    let f = Figures {
        matches,
        running,
        connected: players.iter().filter(|p| p.welcomed).count(),
        relay_cpu: (cpu - window_start.1) / elapsed,
        relay_rss_kib,
        loops: {
            let n = get("loops.iterations").max(1) as f64;
            (
                n / elapsed,
                get("loops.in") as f64 / n,
                get("loops.out") as f64 / n,
            )
        },
        load_cpu: load_cpu / elapsed,
        datagrams_in_per_s: (counters.get("datagrams").copied().unwrap_or(0) - window_start.2)
            as f64
            / elapsed,
        datagram: [
            get("datagram.p50_us"),
            get("datagram.p99_us"),
            get("datagram.p999_us"),
            get("datagram.max_us"),
        ],
        processing: [
            get("processing.p50_us"),
            get("processing.p99_us"),
            get("processing.p999_us"),
            get("processing.max_us"),
        ],
        timer: [
            get("timer.p50_us"),
            get("timer.p99_us"),
            get("timer.p999_us"),
            get("timer.max_us"),
        ],
        order_ms: [
            percentile(&order_latency_us, 500) as f64 / 1000.0,
            percentile(&order_latency_us, 990) as f64 / 1000.0,
        ],
        turns_per_s: turns as f64 / elapsed,
        expected_turns_per_s: (matches * usize::from(SEATS)) as f64 * TICKS_PER_SECOND as f64,
        reconnects,
    };
    // An overloaded run still gives its figures (marked as not kept up);
    // only a run where nothing played is a failure.
    if f.connected == 0 || turns == 0 {
        return Err(format!(
            "the load did not run: {running} of {matches} matches running, {} clients connected, {turns} turns, {} reconnects",
            f.connected, f.reconnects
        ));
    }
    Ok(f)
}

pub fn main() -> ExitCode {
    let o = match parse_options() {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("rungs-relay-load: {e}");
            }
            print!("{HELP}");
            return ExitCode::from(2);
        }
    };
    o.launch.apply_to_self();
    println!(
        "8-seat matches at 30 ticks/s, a bundle every {} tick(s), 120 APM per player; {} s warm-up, {} s measured ({} build)",
        o.bundle_interval,
        o.warmup.max(2),
        o.seconds,
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    println!("matches | running | clients welcomed | relay CPU (share of a core) | datagrams in/s | relay datagram p50/p99/p99.9/max (us) | relay processing p50/p99/p99.9/max (us) | relay timer lateness p50/p99/p99.9/max (us) | order->turn p50/p99 (ms, client side) | turns/s of expected | reconnects | generator CPU | relay p99 < 2 ms | kept up | relay CPU per match (us/s) | relay RSS (MiB) | relay loops/s, datagrams in / out per loop");
    let mut failed = false;
    for (tag, &matches) in o.counts.iter().enumerate() {
        match run(&o, matches, tag) {
            Ok(f) => {
                // The relay's share: its work on each datagram and its
                // timers' lateness, both p99 under 2 ms.
                let relay_ok = f.processing[1] < 2000 && f.timer[1] < 2000;
                // The whole path kept up: everyone in, every turn, and
                // orders back within a bundle interval and a tick (the
                // schedule) plus one tick.
                let ticks = f64::from(o.bundle_interval) + 1.0;
                let kept_up = f.running == matches as u64
                    && f.connected == matches * usize::from(SEATS)
                    && f.turns_per_s >= 0.95 * f.expected_turns_per_s
                    && f.order_ms[1] <= ticks * 1000.0 / TICKS_PER_SECOND as f64;
                println!(
                    "{:7} | {:7} | {:>7} of {:>6} | {:27.3} | {:14.0} | {:>6} / {:>5} / {:>6} / {:>6} | {:>6} / {:>5} / {:>6} / {:>6} | {:>6} / {:>5} / {:>6} / {:>6} | {:>6.1} / {:>6.1} | {:>8.0} of {:>8.0} | {:>10} | {:13.3} | {:15} | {:7} | {:26.0} | {:15.1} | {:.0}, {:.1} / {:.1}",
                    f.matches,
                    f.running,
                    f.connected,
                    matches * usize::from(SEATS),
                    f.relay_cpu,
                    f.datagrams_in_per_s,
                    f.datagram[0],
                    f.datagram[1],
                    f.datagram[2],
                    f.datagram[3],
                    f.processing[0],
                    f.processing[1],
                    f.processing[2],
                    f.processing[3],
                    f.timer[0],
                    f.timer[1],
                    f.timer[2],
                    f.timer[3],
                    f.order_ms[0],
                    f.order_ms[1],
                    f.turns_per_s,
                    f.expected_turns_per_s,
                    f.reconnects,
                    f.load_cpu,
                    if relay_ok { "yes" } else { "no" },
                    if kept_up { "yes" } else { "no" },
                    f.relay_cpu * 1e6 / matches as f64,
                    f.relay_rss_kib as f64 / 1024.0,
                    f.loops.0,
                    f.loops.1,
                    f.loops.2
                );
            }
            Err(e) => {
                println!("{matches:7} | failed: {e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
