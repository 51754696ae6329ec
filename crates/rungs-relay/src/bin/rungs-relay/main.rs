//! `rungs-relay`: relay-sequenced lockstep matches (S10) on one UDP port.
//!
//! A thin edge around [`rungs_core::relay::Relay`]: one socket, the wall clock,
//! a setup file of matches and an admin socket (`admin.rs`), a log line per
//! event worth knowing, latency histograms (`latency.rs`), metrics and a
//! health check over HTTP (`metrics.rs`, `http.rs`), and a graceful drain
//! on SIGINT/SIGTERM (`drain.rs`). See `docs/relay.md` and
//! `docs/relay-operations.md`.
//!
//! Exit codes: 0 fine (a drain in which every match finished); 1 the
//! socket or a file failed; 2 bad usage; 3 drained, but matches still going
//! at the drain's deadline were ended.

// The admin socket is Unix-only; elsewhere its commands (and the latency
// report they give) are compiled and unit-tested but not reachable.
#[cfg_attr(not(unix), allow(dead_code))]
mod admin;
mod drain;
mod events;
mod http;
mod inbox;
mod journal;
#[cfg_attr(not(unix), allow(dead_code))]
mod latency;
mod metrics;
mod outbox;
mod persist;
mod setup;
mod store;

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rungs_core::relay::ticket::{issue, LobbySecret, TicketFields};
use rungs_core::relay::{CookieKey, MatchSetup, Relay, RelayConfig};
use socket2::{Domain, Protocol, Socket, Type};

use setup::{parse_line, Defaults};

const HELP: &str = "\
rungs-relay: relay-sequenced lockstep matches on one UDP port

USAGE
  rungs-relay serve [FLAGS]     serve matches from a setup file and/or an
                                admin socket
  rungs-relay ticket [FLAGS]    issue a ticket (for testing; lobbies do this)
  rungs-relay export [FLAGS]    write a match's turn log (for replays)

SERVE FLAGS (environment variable; default)
  --listen ADDR               RUNGS_RELAY_LISTEN; 0.0.0.0:7000
  --secret HEX                RUNGS_RELAY_SECRET: the lobby secret, 32 hex digits
  --secret-file PATH          RUNGS_RELAY_SECRET_FILE: a file holding it
  --matches PATH              RUNGS_RELAY_MATCHES: the setup file, re-read when
                              it changes (one `match ID seats N humans 0,1,..`
                              line per match; see docs/relay.md)
  --admin PATH                RUNGS_RELAY_ADMIN: a Unix-domain socket (created
                              0600) taking `create`, `list`, `end`, `counters`,
                              `latency` lines (`help` lists them). At least one of
                              --matches and --admin is required.
  --admin-idle-seconds N      RUNGS_RELAY_ADMIN_IDLE_SECONDS; 30: close an admin
                              connection that sends no command for this long
                              (16 are served at once)
  --load-wait-seconds N       RUNGS_RELAY_LOAD_WAIT_SECONDS; 60 (0-3600): start a
                              match this long after it was created even if some
                              players have not joined
  --grace-seconds N           RUNGS_RELAY_GRACE_SECONDS; 60 (0-3600): reconnect grace
  --max-connections N         RUNGS_RELAY_MAX_CONNECTIONS; 65536 (1-1048576)
  --address-hellos N          RUNGS_RELAY_ADDRESS_HELLOS; 16 (1-100000): Hellos
                              without a cookie answered per second from one IPv4
                              address or IPv6 /64, twice that at once (raise it
                              for many players behind one address)
  --state DIR                 RUNGS_RELAY_STATE: keep every match's turn log
                              there, so a restart with the same flags resumes
                              them (created 0700); without it a restart loses
                              every match
  --state-sync-ms N           RUNGS_RELAY_STATE_SYNC_MS; 1000: fdatasync the
                              journal this often (what a power loss can lose)
  --keep-turn-logs yes|no     RUNGS_RELAY_KEEP_TURN_LOGS; no: keep each ended
                              match's turn log in DIR/turn-logs (replays)
  --metrics ADDR              RUNGS_RELAY_METRICS; off: serve HTTP on ADDR (e.g.
                              127.0.0.1:9464): GET /metrics (OpenMetrics text),
                              GET /health (200 serving, 503 draining)
  --drain-seconds N           RUNGS_RELAY_DRAIN_SECONDS; 300 (0-86400): on SIGTERM
                              or SIGINT take no new matches, let the running
                              ones finish for up to N s, then end the rest and
                              exit (a second signal ends them at once)

TICKET FLAGS
  --secret HEX | --secret-file PATH   as above (or the same variables)
  --match ID --seat N         required
  --expires-in SECONDS        default 21600 (6 hours)
  --nonce N                   default: from the clock
  Prints `<ticket hex>:<link secret hex>` on stdout.

EXPORT FLAGS
  --state DIR --match ID --out FILE   the match's turn log from the relay's
                              state (docs/relay.md, Replays); a running
                              match's up to its last final tick

EXIT CODES
  0  done; after a drain: every match finished before the deadline
  1  a socket or a file failed
  2  bad usage
  3  drained, and matches still going at the deadline were ended
";

/// SIGINT and SIGTERM received so far: the first starts the drain, a
/// second ends it (`drain.rs`). The serving loop polls it.
static TERMINATION_SIGNALS: AtomicU32 = AtomicU32::new(0);

#[cfg(unix)]
extern "C" fn on_signal(_signal: libc::c_int) {
    TERMINATION_SIGNALS.fetch_add(1, Ordering::SeqCst);
}

#[cfg(unix)]
fn install_signal_handlers() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

#[cfg(not(unix))]
fn install_signal_handlers() {}

/// Flags, each with its environment variable as the fallback.
struct Args {
    pairs: Vec<(String, String)>,
}

impl Args {
    fn parse(raw: &[String]) -> Result<Args, String> {
        let mut pairs = Vec::new();
        let mut it = raw.iter();
        while let Some(flag) = it.next() {
            if flag == "--help" || flag == "-h" {
                return Err(String::new());
            }
            let Some(name) = flag.strip_prefix("--") else {
                return Err(format!("unexpected argument `{flag}`"));
            };
            let value = it.next().ok_or(format!("`{flag}` needs a value"))?;
            pairs.push((name.to_string(), value.clone()));
        }
        Ok(Args { pairs })
    }

    fn get(&self, name: &str, env: Option<&str>) -> Option<String> {
        self.pairs
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .or_else(|| env.and_then(|e| std::env::var(e).ok()))
    }

    fn number<T: std::str::FromStr>(
        &self,
        name: &str,
        env: Option<&str>,
        default: Option<T>,
    ) -> Result<T, String> {
        match self.get(name, env) {
            Some(text) => text
                .trim()
                .parse()
                .map_err(|_| format!("--{name}: `{text}` is not a valid number")),
            None => default.ok_or(format!("--{name} is required")),
        }
    }

    fn check_known(&self, known: &[&str]) -> Result<(), String> {
        match self
            .pairs
            .iter()
            .find(|(n, _)| !known.contains(&n.as_str()))
        {
            Some((n, _)) => Err(format!("unknown flag --{n}")),
            None => Ok(()),
        }
    }

    fn secret(&self) -> Result<LobbySecret, String> {
        let text = match self.get("secret", Some("RUNGS_RELAY_SECRET")) {
            Some(t) => t,
            None => {
                let path = self
                    .get("secret-file", Some("RUNGS_RELAY_SECRET_FILE"))
                    .ok_or("a lobby secret is required: --secret HEX or --secret-file PATH")?;
                std::fs::read_to_string(&path).map_err(|e| format!("--secret-file {path}: {e}"))?
            }
        };
        LobbySecret::from_hex(&text).map_err(|e| format!("lobby secret: {e}"))
    }
}

/// A cookie key of this process's own (see `RelayConfig::cookie_key`):
/// from the operating system's random source, through the keys std draws
/// from it for hash maps, so no crate is needed for it.
fn random_cookie_key() -> CookieKey {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut key = [0u8; 16];
    for (i, half) in key.chunks_mut(8).enumerate() {
        let mut h = RandomState::new().build_hasher();
        h.write_usize(i);
        h.write_u128(unix_now().as_nanos());
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    CookieKey(key)
}

fn unix_now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

fn log(line: &str) {
    let t = unix_now();
    eprintln!("[{}.{:03}] {line}", t.as_secs(), t.subsec_millis());
}

fn main() -> ExitCode {
    // The relay's links draw connection nonces: give them this run's entropy.
    rungs_net::seed_connection_nonces();
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let (command, rest) = match raw.split_first() {
        Some((c, rest)) => (c.as_str(), rest),
        None => ("--help", &raw[..]),
    };
    let result = match command {
        "serve" => Args::parse(rest).and_then(|a| serve(&a)),
        "ticket" => Args::parse(rest).and_then(|a| ticket(&a).map(|()| 0)),
        "export" => Args::parse(rest).and_then(|a| persist::export(&a).map(|()| 0)),
        _ => Err(String::new()),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(message) if message.is_empty() => {
            print!("{HELP}");
            ExitCode::from(if command == "--help" || command == "-h" {
                0
            } else {
                2
            })
        }
        Err(message) if message.starts_with("io:") => {
            eprintln!("rungs-relay: {}", &message[3..]);
            ExitCode::from(1)
        }
        Err(message) => {
            eprintln!("rungs-relay: {message}");
            ExitCode::from(2)
        }
    }
}

fn ticket(args: &Args) -> Result<(), String> {
    args.check_known(&[
        "secret",
        "secret-file",
        "match",
        "seat",
        "expires-in",
        "nonce",
    ])?;
    let secret = args.secret()?;
    let now = unix_now();
    let fields = TicketFields {
        match_id: args.number("match", None, None)?,
        seat: args.number("seat", None, None)?,
        expires_unix_s: now.as_secs() + args.number::<u64>("expires-in", None, Some(21_600))?,
        nonce: args.number("nonce", None, Some(now.as_nanos() as u64))?,
    };
    let credentials = issue(&secret, &fields).map_err(|e| format!("--seat: {e}"))?;
    println!("{}", credentials.to_text());
    Ok(())
}

fn bind(address: SocketAddr) -> std::io::Result<UdpSocket> {
    let socket = Socket::new(
        Domain::for_address(address),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    if address.is_ipv6() {
        // One socket for IPv4 and IPv6 clients where the OS allows it.
        let _ = socket.set_only_v6(false);
    }
    let _ = socket.set_recv_buffer_size(4 << 20);
    let _ = socket.set_send_buffer_size(4 << 20);
    socket.bind(&address.into())?;
    Ok(socket.into())
}

/// Wait until the socket has a datagram or `timeout_us` passed (or a
/// signal came). Not a socket receive timeout: Linux counts those in
/// scheduler ticks (4–10 ms), which made bundles due at a tick start go out
/// up to 10 ms late; `ppoll` waits in nanoseconds.
#[cfg(target_os = "linux")]
fn wait_for_datagram(socket: &UdpSocket, timeout_us: u64) {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let timeout = libc::timespec {
        tv_sec: (timeout_us / 1_000_000) as libc::time_t,
        tv_nsec: ((timeout_us % 1_000_000) * 1000) as libc::c_long,
    };
    // SAFETY: one pollfd and one timespec we own; no signal mask.
    unsafe { libc::ppoll(&mut fd, 1, &timeout, std::ptr::null()) };
}

/// Let the kernel wake this process within a microsecond of its timers
/// (its default slack is 50 µs; a relay's bundles are due at tick starts).
#[cfg(target_os = "linux")]
fn precise_timers() {
    // SAFETY: prctl with PR_SET_TIMERSLACK takes one integer argument.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong) };
}

#[cfg(not(target_os = "linux"))]
fn precise_timers() {}

/// Elsewhere on Unix: `poll`, whole milliseconds rounded up.
#[cfg(all(unix, not(target_os = "linux")))]
fn wait_for_datagram(socket: &UdpSocket, timeout_us: u64) {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd we own.
    unsafe { libc::poll(&mut fd, 1, timeout_us.div_ceil(1000) as libc::c_int) };
}

/// Windows: a blocking peek with a receive timeout (milliseconds there).
#[cfg(not(unix))]
fn wait_for_datagram(socket: &UdpSocket, timeout_us: u64) {
    let _ = socket.set_nonblocking(false);
    let _ = socket.set_read_timeout(Some(Duration::from_micros(timeout_us.max(1000))));
    let _ = socket.peek_from(&mut [0u8; 1]);
    let _ = socket.set_nonblocking(true);
}

/// The setup file and when it was last read.
struct SetupFile {
    path: String,
    modified: Option<SystemTime>,
    checked: Option<Instant>,
    defaults: Defaults,
}

impl SetupFile {
    /// Add the matches of the file not yet seen, when it changed: not one
    /// the relay holds, nor one it added before or its state saw end.
    fn refresh(
        &mut self,
        relay: &mut Relay,
        persistence: &mut persist::Persistence,
        now_us: u64,
    ) -> Result<(), String> {
        if self
            .checked
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return Ok(());
        }
        self.checked = Some(Instant::now());
        let modified = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .map_err(|e| format!("io:--matches {}: {e}", self.path))?;
        if self.modified == Some(modified) {
            return Ok(());
        }
        self.modified = Some(modified);
        let text = std::fs::read_to_string(&self.path)
            .map_err(|e| format!("io:--matches {}: {e}", self.path))?;
        for (number, line) in text.lines().enumerate() {
            match parse_line(line, &self.defaults) {
                Ok(Some(setup)) => {
                    if relay.sequencer(setup.match_id).is_some()
                        || !persistence.may_add(setup.match_id)
                    {
                        continue;
                    }
                    match relay.add_match(setup, now_us) {
                        Ok(()) => {
                            persistence.added(setup.match_id);
                            log_created(&setup, "setup file")
                        }
                        Err(e) => log(&format!("{}:{}: {e}", self.path, number + 1)),
                    }
                }
                Ok(None) => {}
                Err(e) => log(&format!("{}:{}: {e}", self.path, number + 1)),
            }
        }
        Ok(())
    }
}

fn log_created(setup: &MatchSetup, by: &str) {
    log(&format!(
        "match {} created ({by}): {} seats, humans {:#06x}, {} mHz, bundle every {} tick(s), ai_order_delay {}",
        setup.match_id,
        setup.seat_count,
        setup.human_mask,
        setup.tick_rate_millihz,
        setup.bundle_interval,
        setup.ai_order_delay
    ));
}

/// The admin socket, where the platform has Unix-domain sockets.
#[cfg(unix)]
fn open_admin(path: Option<String>, idle_s: u64) -> Result<Option<admin::AdminSocket>, String> {
    let idle = Duration::from_secs(idle_s);
    path.map(|p| admin::AdminSocket::bind(std::path::Path::new(&p), idle))
        .transpose()
}

#[cfg(not(unix))]
fn open_admin(
    path: Option<String>,
    _idle_s: u64,
) -> Result<Option<std::convert::Infallible>, String> {
    match path {
        Some(_) => {
            Err("--admin: the admin socket is a Unix-domain socket; not on this platform".into())
        }
        None => Ok(None),
    }
}

/// Answer the admin commands waiting, between datagram batches. What a
/// command changed is in the journal before its reply goes out: an operator
/// who reads "over" (or "created") may kill the relay at once, and the
/// restarted relay must agree with what it said. While draining, `create`
/// is refused.
#[cfg(unix)]
fn serve_admin(
    admin: &Option<admin::AdminSocket>,
    relay: &mut Relay,
    persistence: &mut persist::Persistence,
    (defaults, accepting_matches): (&Defaults, bool),
    latency: &mut latency::Latency,
    now_us: u64,
) {
    let Some(admin) = admin else { return };
    while let Ok(request) = admin.requests.try_recv() {
        if !accepting_matches && admin::creates_a_match(&request.line) {
            let _ = request.reply.send(admin::DRAINING_REPLY.into());
            continue;
        }
        let (reply, effect) = admin::execute(&request.line, relay, defaults, latency, now_us);
        match effect {
            admin::Effect::Created(id) => {
                if let Some(s) = relay.sequencer(id) {
                    log_created(s.setup(), "admin socket");
                }
            }
            admin::Effect::Ended(id) => log(&format!("match {id} ended by the admin socket")),
            admin::Effect::None => {}
        }
        persistence.write_ahead(relay, log);
        let _ = request.reply.send(reply);
    }
}

#[cfg(not(unix))]
fn serve_admin(
    _: &Option<std::convert::Infallible>,
    _: &mut Relay,
    _: &mut persist::Persistence,
    _: (&Defaults, bool),
    _: &mut latency::Latency,
    _: u64,
) {
}

/// Send what the outbox holds: count what the kernel took, and count (and
/// now and then log) what it refused.
fn flush(
    outbox: &mut outbox::Outbox,
    socket: &UdpSocket,
    io_errors: &mut u64,
    tally: &mut metrics::Tally,
) {
    let queued = outbox.queued() as u64;
    let (failed, error) = outbox.flush(socket);
    tally.datagrams_sent += queued.saturating_sub(failed);
    for _ in 0..failed {
        *io_errors += 1;
        tally.send_errors += 1;
        if io_errors.is_power_of_two() {
            if let Some(e) = &error {
                log(&format!("send error ({io_errors} so far): {e}"));
            }
        }
    }
}

/// The `--metrics` listener, if asked for (an empty value is off, so a
/// container's environment can turn it off).
fn open_metrics(args: &Args) -> Result<Option<TcpListener>, String> {
    let Some(text) = args.get("metrics", Some("RUNGS_RELAY_METRICS")) else {
        return Ok(None);
    };
    if text.trim().is_empty() {
        return Ok(None);
    }
    let address: SocketAddr = text
        .trim()
        .parse()
        .map_err(|_| format!("--metrics: `{text}` is not an address like 127.0.0.1:9464"))?;
    TcpListener::bind(address)
        .map(Some)
        .map_err(|e| format!("io:--metrics {address}: {e}"))
}

/// Serve until a drain ends; the exit code (`drain::Outcome::code`).
fn serve(args: &Args) -> Result<u8, String> {
    args.check_known(&[
        "listen",
        "secret",
        "secret-file",
        "matches",
        "admin",
        "load-wait-seconds",
        "grace-seconds",
        "max-connections",
        "admin-idle-seconds",
        "address-hellos",
        "state",
        "state-sync-ms",
        "keep-turn-logs",
        "metrics",
        "drain-seconds",
    ])?;
    let secret = args.secret()?;
    let listen: SocketAddr = args
        .get("listen", Some("RUNGS_RELAY_LISTEN"))
        .unwrap_or_else(|| "0.0.0.0:7000".into())
        .parse()
        .map_err(|_| "--listen: not an address like 0.0.0.0:7000".to_string())?;
    let flag = |e: String| format!("--{}", e.trim_start_matches('`').replacen('`', "", 1));
    let defaults = Defaults {
        load_wait_seconds: setup::in_range(
            "load-wait-seconds",
            args.number(
                "load-wait-seconds",
                Some("RUNGS_RELAY_LOAD_WAIT_SECONDS"),
                Some(60),
            )?,
            0..=setup::MAX_WAIT_SECONDS,
        )
        .map_err(flag)?,
        grace_seconds: setup::in_range(
            "grace-seconds",
            args.number("grace-seconds", Some("RUNGS_RELAY_GRACE_SECONDS"), Some(60))?,
            0..=setup::MAX_WAIT_SECONDS,
        )
        .map_err(flag)?,
    };
    let mut config = RelayConfig::new(secret);
    config.cookie_key = random_cookie_key();
    config.max_connections = setup::in_range(
        "max-connections",
        args.number(
            "max-connections",
            Some("RUNGS_RELAY_MAX_CONNECTIONS"),
            Some(config.max_connections),
        )?,
        1..=1 << 20,
    )
    .map_err(flag)?;
    let admin_idle_s = setup::in_range(
        "admin-idle-seconds",
        args.number(
            "admin-idle-seconds",
            Some("RUNGS_RELAY_ADMIN_IDLE_SECONDS"),
            Some(admin::DEFAULT_IDLE_SECONDS),
        )?,
        1..=setup::MAX_WAIT_SECONDS,
    )
    .map_err(flag)?;
    let address_hellos: u32 = setup::in_range(
        "address-hellos",
        args.number(
            "address-hellos",
            Some("RUNGS_RELAY_ADDRESS_HELLOS"),
            Some(16),
        )?,
        1..=100_000,
    )
    .map_err(flag)?;
    let drain_seconds = setup::in_range(
        "drain-seconds",
        args.number(
            "drain-seconds",
            Some("RUNGS_RELAY_DRAIN_SECONDS"),
            Some(drain::DEFAULT_DRAIN_SECONDS),
        )?,
        0..=drain::MAX_DRAIN_SECONDS,
    )
    .map_err(flag)?;
    let metrics_listener = open_metrics(args)?;
    config.hello_limits.address_burst = 2 * address_hellos;
    config.hello_limits.address_interval_us = 1_000_000 / u64::from(address_hellos);
    let matches = args.get("matches", Some("RUNGS_RELAY_MATCHES"));
    let admin_path = args.get("admin", Some("RUNGS_RELAY_ADMIN"));
    if matches.is_none() && admin_path.is_none() {
        return Err(
            "--matches PATH (a setup file) or --admin PATH (an admin socket) is required".into(),
        );
    }
    config.persistent = persist::state_dir(args).is_some();
    let mut relay = Relay::new(config).map_err(|e| e.to_string())?;
    let mut setup_file = matches.map(|path| SetupFile {
        path,
        modified: None,
        checked: None,
        defaults,
    });
    let socket = bind(listen).map_err(|e| format!("io:bind {listen}: {e}"))?;
    latency::enable_receive_timestamps(&socket);
    socket
        .set_nonblocking(true)
        .map_err(|e| format!("io:socket: {e}"))?;
    let mut latency = latency::Latency::new();
    // (kernel arrival, recv returned) of the batch's datagrams, realtime ns.
    let mut arrivals: Vec<(u64, u64)> = Vec::with_capacity(inbox::BATCH);
    let mut inbox = inbox::Inbox::new();
    let local = socket
        .local_addr()
        .map_err(|e| format!("io:local address: {e}"))?;
    let admin = open_admin(admin_path.clone(), admin_idle_s)?;
    install_signal_handlers();
    log(&format!("listening on {local}"));
    if let Some(path) = &admin_path {
        log(&format!("admin socket at {path}"));
    }
    let metrics_shared = match metrics_listener {
        Some(listener) => {
            let address = listener
                .local_addr()
                .map_err(|e| format!("io:--metrics: {e}"))?;
            let shared = Arc::new(metrics::Shared::new());
            http::spawn(listener, shared.clone()).map_err(|e| format!("io:--metrics: {e}"))?;
            log(&format!("metrics at {address} (GET /metrics, GET /health)"));
            Some(shared)
        }
        None => None,
    };
    let mut metrics = metrics::Metrics::new(metrics_shared);
    let mut drain = drain::Drain::new(Duration::from_secs(drain_seconds));

    let start = Instant::now();
    let now_us = || start.elapsed().as_micros() as u64;
    let mut persistence = persist::Persistence::open(args, &mut relay, now_us(), log)?;
    if let Some(file) = setup_file.as_mut() {
        file.refresh(&mut relay, &mut persistence, now_us())?;
    }
    let mut event_log = events::EventLog::new();
    let mut lines: Vec<String> = Vec::new();
    let mut outbox = outbox::Outbox::new();
    let mut io_errors = 0u64;
    let mut batch_was_full = false;
    precise_timers();
    let outcome = loop {
        metrics.heartbeat();
        let signals = TERMINATION_SIGNALS.load(Ordering::SeqCst);
        match drain.step(signals, &mut relay, now_us(), log) {
            drain::Step::Serve => {}
            drain::Step::Ended(matches) => metrics.tally.ended_by_drain(matches),
            drain::Step::Exit(outcome) => break outcome,
        }
        let accepting_matches = drain.accepting_matches();
        if !accepting_matches {
            metrics.set_draining();
        } else if let Some(file) = setup_file.as_mut() {
            if let Err(e) = file.refresh(&mut relay, &mut persistence, now_us()) {
                log(&e[3..]);
            }
        }
        serve_admin(
            &admin,
            &mut relay,
            &mut persistence,
            (&defaults, accepting_matches),
            &mut latency,
            now_us(),
        );
        let now = now_us();
        let wait_us = relay
            .poll_timeout()
            .map_or(50_000, |t| t.saturating_sub(now))
            .clamp(50, 50_000);
        if !batch_was_full {
            wait_for_datagram(&socket, wait_us);
        }
        // One system call for the batch, one clock reading for all of it:
        // a datagram's time is when its batch was read.
        let received = match inbox.receive(&socket) {
            Ok(n) => n,
            Err(e) => {
                // ICMP errors from a client that went away show up here.
                io_errors += 1;
                metrics.tally.receive_errors += 1;
                if io_errors.is_power_of_two() {
                    log(&format!("receive error ({io_errors} so far): {e}"));
                }
                0
            }
        };
        arrivals.clear();
        latency.loops.iterations += 1;
        latency.loops.datagrams_in += received as u64;
        if received > 0 {
            let (read_us, unix_s) = (now_us(), unix_now().as_secs());
            let received_ns = latency::realtime_ns();
            for i in 0..received {
                let (bytes, source, arrived_ns) = inbox.get(i);
                relay.handle_datagram(read_us, unix_s, source, bytes);
                arrivals.push((arrived_ns, received_ns));
            }
        }
        batch_was_full = received >= inbox::BATCH;
        let now = now_us();
        let timer_due = relay.poll_timeout().filter(|t| *t <= now);
        if timer_due.is_some() {
            relay.handle_timeout(now);
        }
        // Everything sent from here on is in the journal first.
        persistence.write_ahead(&mut relay, log);
        // (The outbox always has a buffer: it is flushed when full.)
        while let Some(buf) = outbox.next_buffer() {
            let Some((to, len)) = relay.poll_transmit(now, buf) else {
                break;
            };
            outbox.commit(to, len);
            latency.loops.datagrams_out += 1;
            if outbox.is_full() {
                flush(&mut outbox, &socket, &mut io_errors, &mut metrics.tally);
            }
        }
        flush(&mut outbox, &socket, &mut io_errors, &mut metrics.tally);
        if let Some(due) = timer_due {
            let late_us = now_us().saturating_sub(due);
            latency.timer.record(late_us);
            metrics.tally.timer.record(late_us);
        }
        let done_ns = latency::realtime_ns();
        for (arrived, received) in &arrivals {
            let datagram_us = done_ns.saturating_sub(*arrived) / 1000;
            let processing_us = done_ns.saturating_sub(*received) / 1000;
            latency.datagram.record(datagram_us);
            latency.processing.record(processing_us);
            metrics.tally.datagram.record(datagram_us);
            metrics.tally.processing.record(processing_us);
        }
        let second = unix_now().as_secs();
        while let Some(event) = relay.poll_event() {
            persistence.event(&event);
            metrics.tally.event(&event, drain.ended_matches());
            event_log.event(second, &event, &mut lines);
        }
        event_log.tick(second, relay.counters(), &mut lines);
        for line in lines.drain(..) {
            log(&line);
        }
        metrics.publish(&relay);
    };
    let c = relay.counters();
    log(&format!(
        "stopped: {} datagrams, {} connections opened, {} Hellos rejected, {} dropped; exit {} ({})",
        c.datagrams,
        c.connections_opened,
        c.rejected.iter().sum::<u64>(),
        c.not_relay + c.malformed_hellos + c.unknown_connection + c.link_drops,
        outcome.code(),
        match outcome {
            drain::Outcome::Finished => "every match finished".to_string(),
            drain::Outcome::EndedAtDeadline(n) =>
                format!("{n} match(es) ended at the drain deadline"),
        }
    ));
    Ok(outcome.code())
}
