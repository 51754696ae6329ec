//! The admin socket: a line-based text protocol on a Unix-domain socket, so
//! an operator or a lobby on the same machine can create, list and end
//! matches and read the counters with `nc -U` or `socat`.
//!
//! ```text
//! > create 1001 seats 4 humans 0,1,2 ai_order_delay 8
//! ok match 1001 created
//! > list
//! match 1001 loading tick 0 horizon 0 seats loading,loading,loading,ai orders 0 desyncs 0
//! ok 1 matches
//! > end 1001
//! ok match 1001 ending
//! > counters
//! datagrams 0
//! ...
//! ok
//! ```
//!
//! Every reply is zero or more data lines and then one line starting with
//! `ok` or `error`, so a script reads until it sees one. `create` takes a
//! setup-file line (with or without the leading `match`) and goes through
//! the same parser ([`super::setup::parse_line`]).
//!
//! Why a Unix-domain socket: relays are server processes on Linux, and the
//! socket file's permissions (created 0600, owner only) authenticate the
//! caller with nothing to configure, issue or leak; a TCP port would need a
//! token and would be reachable by every local user. Not available on
//! non-Unix builds (the flag is refused there).
//!
//! Threads: one accepts, one per admin connection (at most
//! [`MAX_ADMIN_CONNECTIONS`]) reads lines and waits for the reply; the relay
//! itself stays on the serving thread, which takes the commands between
//! datagram batches ([`execute`] is plain code over the `Relay`, no I/O).

use rungs_core::relay::Relay;
use rungs_core::wire::relay::{RejectReason, SeatPresence};

use super::latency::Latency;
use super::metrics::snake_case;
use super::setup::{parse_line, Defaults};

/// Admin connections served at once; further ones get an error line.
pub const MAX_ADMIN_CONNECTIONS: usize = 16;
/// Longest command line accepted, bytes.
pub const MAX_LINE_BYTES: usize = 4096;
/// By default, a connection that completes no line for this long is closed
/// (with an error line), so forgotten or stalled connections cannot hold
/// the [`MAX_ADMIN_CONNECTIONS`] places (`--admin-idle-seconds`).
pub const DEFAULT_IDLE_SECONDS: u64 = 30;

const HELP: &str = "\
commands:
  create ID seats N humans LIST [key value]...   a match, as a setup-file line
  list                                           every match with its state
  end ID                                         end a match (clients hear MatchOver)
  counters                                       datagrams, drops by reason, matches
  latency [reset]                                what the relay adds, µs, and its loop's batching (then reset)
  help                                           this text
  quit                                           close this connection";

/// The reply to `create` while the relay drains (`drain.rs`).
pub const DRAINING_REPLY: &str = "error the relay is draining: it takes no new matches";

/// Whether `line` is a `create` command (refused while draining).
pub fn creates_a_match(line: &str) -> bool {
    line.split_whitespace().next() == Some("create")
}

/// What a command did, for the serving thread's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Nothing worth a log line.
    None,
    /// A match was created (log it like a setup-file match).
    Created(u64),
    /// A match was ended.
    Ended(u64),
}

/// Run one command line against the relay; the reply (ending with an `ok`
/// or `error` line, no trailing newline) and what it did.
pub fn execute(
    line: &str,
    relay: &mut Relay,
    defaults: &Defaults,
    latency: &mut Latency,
    now_us: u64,
) -> (String, Effect) {
    let line = line.trim();
    let (command, rest) = match line.split_once(char::is_whitespace) {
        Some((c, r)) => (c, r.trim()),
        None => (line, ""),
    };
    match command {
        "create" => {
            let rest = rest.strip_prefix("match ").unwrap_or(rest);
            match parse_line(&format!("match {rest}"), defaults) {
                Ok(Some(setup)) => match relay.add_match(setup, now_us) {
                    Ok(()) => (
                        format!("ok match {} created", setup.match_id),
                        Effect::Created(setup.match_id),
                    ),
                    Err(e) => (format!("error match {}: {e}", setup.match_id), Effect::None),
                },
                Ok(None) => (
                    "error create needs ID seats N humans LIST".into(),
                    Effect::None,
                ),
                Err(e) => (format!("error create: {e}"), Effect::None),
            }
        }
        "list" if rest.is_empty() => (list(relay, now_us), Effect::None),
        "end" => match rest.parse::<u64>() {
            Ok(id) => match relay.end_match(id, now_us) {
                Ok(()) => (format!("ok match {id} ending"), Effect::Ended(id)),
                Err(_) => (format!("error no match {id}"), Effect::None),
            },
            Err(_) => (
                format!("error end needs a match id, got `{rest}`"),
                Effect::None,
            ),
        },
        "counters" if rest.is_empty() => (counters(relay), Effect::None),
        "latency" if rest.is_empty() || rest == "reset" => {
            let reply = format!(
                "{}\n{}\n{}\n{}\nok",
                latency.datagram.line("datagram"),
                latency.processing.line("processing"),
                latency.timer.line("timer"),
                latency.loops.line()
            );
            if rest == "reset" {
                latency.reset();
            }
            (reply, Effect::None)
        }
        "help" => (format!("{HELP}\nok"), Effect::None),
        "list" | "counters" | "latency" => (
            format!("error {command} takes no arguments, got `{rest}`"),
            Effect::None,
        ),
        "" => ("error empty command; try help".into(), Effect::None),
        _ => (
            format!("error unknown command `{command}`; try help"),
            Effect::None,
        ),
    }
}

fn presence_name(p: SeatPresence) -> &'static str {
    match p {
        SeatPresence::Ai => "ai",
        SeatPresence::Loading => "loading",
        SeatPresence::Connected => "connected",
        SeatPresence::Reconnecting => "reconnecting",
        SeatPresence::Left => "left",
    }
}

/// One line per match, in id order.
fn list(relay: &Relay, now_us: u64) -> String {
    let mut ids: Vec<u64> = relay.match_ids().collect();
    ids.sort_unstable();
    let mut out = String::new();
    for id in &ids {
        let Some(s) = relay.sequencer(*id) else {
            continue;
        };
        let state = if s.is_over() {
            "over"
        } else if s.has_started() {
            "running"
        } else {
            "loading"
        };
        let presence = s.presence();
        let seats: Vec<&str> = presence[..usize::from(s.setup().seat_count)]
            .iter()
            .map(|p| presence_name(*p))
            .collect();
        out.push_str(&format!(
            "match {id} {state} tick {} horizon {} seats {} orders {} desyncs {}\n",
            s.tick(now_us),
            s.horizon(),
            seats.join(","),
            s.counters().orders_accepted,
            s.desyncs().len(),
        ));
    }
    out.push_str(&format!("ok {} matches", ids.len()));
    out
}

/// Every counter as `name value`, bad input by reason.
fn counters(relay: &Relay) -> String {
    let c = relay.counters();
    let mut lines = vec![
        ("datagrams".to_string(), c.datagrams),
        ("drop_not_relay".into(), c.not_relay),
        ("drop_malformed_hello".into(), c.malformed_hellos),
        ("drop_duplicate_hello".into(), c.duplicate_hellos),
        ("drop_unknown_connection".into(), c.unknown_connection),
        ("drop_link".into(), c.link_drops),
        ("drop_bad_message".into(), c.bad_messages),
    ];
    for reason in RejectReason::ALL {
        lines.push((
            format!("rejected_{}", snake_case(&format!("{reason:?}"))),
            c.rejected[reason as usize - 1],
        ));
    }
    lines.extend([
        ("rejects_not_queued".into(), c.rejects_not_queued),
        (
            "drop_hello_address_rate".into(),
            c.hellos_limited_by_address,
        ),
        ("drop_hello_ticket_rate".into(), c.hellos_limited_by_ticket),
        ("cookies_sent".into(), c.cookies_sent),
        ("unverified_bytes_in".into(), c.unverified_bytes_in),
        ("unverified_bytes_out".into(), c.unverified_bytes_out),
        ("connections_opened".into(), c.connections_opened),
        ("connections_live".into(), relay.connection_count() as u64),
        ("rebinds".into(), c.rebinds),
        ("drop_move_not_newest".into(), c.moves_refused),
        ("events_dropped".into(), c.events_dropped),
    ]);
    let (mut loading, mut running, mut over) = (0u64, 0u64, 0u64);
    for id in relay.match_ids() {
        match relay.sequencer(id) {
            Some(s) if s.is_over() => over += 1,
            Some(s) if s.has_started() => running += 1,
            Some(_) => loading += 1,
            None => {}
        }
    }
    lines.extend([
        ("matches".into(), relay.match_count() as u64),
        ("matches_loading".into(), loading),
        ("matches_running".into(), running),
        ("matches_over".into(), over),
    ]);
    let mut out = String::new();
    for (name, value) in lines {
        out.push_str(&format!("{name} {value}\n"));
    }
    out.push_str("ok");
    out
}

#[cfg(unix)]
pub use socket::AdminSocket;

#[cfg(unix)]
mod socket {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc::{channel, Receiver, Sender};
    use std::sync::Arc;

    use std::time::Instant;

    use std::time::Duration;

    use super::{MAX_ADMIN_CONNECTIONS, MAX_LINE_BYTES};

    /// A command from an admin connection and where its reply goes.
    pub struct Request {
        pub line: String,
        pub reply: Sender<String>,
    }

    /// The listening socket; commands arrive on [`AdminSocket::requests`].
    pub struct AdminSocket {
        path: PathBuf,
        pub requests: Receiver<Request>,
    }

    impl AdminSocket {
        /// Listen at `path`, created with mode 0600. A stale socket file
        /// (nothing listening) is replaced; a live one or any other file is
        /// an error.
        pub fn bind(path: &Path, idle: Duration) -> Result<AdminSocket, String> {
            if let Ok(meta) = std::fs::symlink_metadata(path) {
                use std::os::unix::fs::FileTypeExt;
                if !meta.file_type().is_socket() {
                    return Err(format!(
                        "io:--admin {}: exists and is not a socket",
                        path.display()
                    ));
                }
                if UnixStream::connect(path).is_ok() {
                    return Err(format!(
                        "io:--admin {}: another process is listening there",
                        path.display()
                    ));
                }
                std::fs::remove_file(path)
                    .map_err(|e| format!("io:--admin {}: {e}", path.display()))?;
            }
            // The socket is created with mode 0600 (owner only): the
            // permissions are the authentication. The umask is process-wide;
            // this runs before any other thread exists.
            // SAFETY: umask only swaps the process's file mode mask.
            let old = unsafe { libc::umask(0o177) };
            let bound = UnixListener::bind(path);
            // SAFETY: as above, restoring the previous mask.
            unsafe { libc::umask(old) };
            let listener = bound.map_err(|e| format!("io:--admin {}: {e}", path.display()))?;
            let (sender, requests) = channel();
            let active = Arc::new(AtomicUsize::new(0));
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(mut stream) = stream else {
                        // Out of descriptors or the like: do not spin.
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        continue;
                    };
                    if active.fetch_add(1, Ordering::SeqCst) >= MAX_ADMIN_CONNECTIONS {
                        active.fetch_sub(1, Ordering::SeqCst);
                        let _ = stream.write_all(b"error too many admin connections\n");
                        continue;
                    }
                    let sender = sender.clone();
                    let active = Arc::clone(&active);
                    std::thread::spawn(move || {
                        serve_connection(stream, &sender, idle);
                        active.fetch_sub(1, Ordering::SeqCst);
                    });
                }
            });
            Ok(AdminSocket {
                path: path.to_path_buf(),
                requests,
            })
        }
    }

    impl Drop for AdminSocket {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    /// A stream whose reads fail once `until` has passed, however the
    /// bytes trickle in (a read timeout alone restarts with every byte).
    struct Deadline {
        stream: UnixStream,
        until: Instant,
    }

    impl Read for Deadline {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let left = self.until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(std::io::ErrorKind::TimedOut.into());
            }
            self.stream.set_read_timeout(Some(left))?;
            self.stream.read(buf)
        }
    }

    /// Read lines, hand each to the serving thread, write its reply. A
    /// line must be complete within `idle` of the last one (or
    /// of connecting); a reply the other end does not read within it
    /// closes the connection too.
    fn serve_connection(stream: UnixStream, requests: &Sender<Request>, idle: Duration) {
        let Ok(mut writer) = stream.try_clone() else {
            return;
        };
        let _ = writer.set_write_timeout(Some(idle));
        let mut reader = BufReader::new(Deadline {
            stream,
            until: Instant::now() + idle,
        });
        let (reply_to, replies) = channel();
        loop {
            let mut bytes = Vec::new();
            let limit = MAX_LINE_BYTES as u64 + 1;
            match (&mut reader).take(limit).read_until(b'\n', &mut bytes) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) => {
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
                    ) {
                        let _ = writer.write_all(
                            format!("error no command for {} s; closing\n", idle.as_secs())
                                .as_bytes(),
                        );
                    }
                    return;
                }
            }
            reader.get_mut().until = Instant::now() + idle;
            if bytes.len() > MAX_LINE_BYTES {
                let _ = writer.write_all(
                    format!("error line longer than {MAX_LINE_BYTES} bytes; closing\n").as_bytes(),
                );
                return;
            }
            let Ok(line) = String::from_utf8(bytes) else {
                if writer
                    .write_all(b"error a command is UTF-8 text\n")
                    .is_err()
                {
                    return;
                }
                continue;
            };
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if line == "quit" {
                let _ = writer.write_all(b"ok bye\n");
                return;
            }
            let request = Request {
                line: line.to_string(),
                reply: reply_to.clone(),
            };
            if requests.send(request).is_err() {
                return; // the relay is stopping
            }
            let Ok(reply) = replies.recv() else { return };
            if writer.write_all(format!("{reply}\n").as_bytes()).is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rungs_core::relay::ticket::LobbySecret;
    use rungs_core::relay::RelayConfig;

    const D: Defaults = Defaults {
        load_wait_seconds: 60,
        grace_seconds: 60,
    };

    fn relay() -> Relay {
        Relay::new(RelayConfig::new(
            LobbySecret::new(*b"admin-test-key-1").unwrap(),
        ))
        .unwrap()
    }

    #[test]
    fn create_list_end_and_counters() {
        let mut r = relay();
        let (reply, effect) = execute(
            "create 7 seats 3 humans 0,1",
            &mut r,
            &D,
            &mut Latency::new(),
            0,
        );
        assert_eq!(
            (reply.as_str(), effect),
            ("ok match 7 created", Effect::Created(7))
        );
        let (reply, _) = execute(
            "create match 8 seats 2 humans 0 ai_order_delay 8",
            &mut r,
            &D,
            &mut Latency::new(),
            0,
        );
        assert_eq!(reply, "ok match 8 created");
        assert_eq!(r.sequencer(8).unwrap().setup().ai_order_delay, 8);
        let (reply, _) = execute("list", &mut r, &D, &mut Latency::new(), 0);
        assert_eq!(
            reply,
            "match 7 loading tick 0 horizon 0 seats loading,loading,ai orders 0 desyncs 0\n\
             match 8 loading tick 0 horizon 0 seats loading,ai orders 0 desyncs 0\n\
             ok 2 matches"
        );
        let (reply, effect) = execute("end 7", &mut r, &D, &mut Latency::new(), 10);
        assert_eq!(
            (reply.as_str(), effect),
            ("ok match 7 ending", Effect::Ended(7))
        );
        assert!(r.sequencer(7).unwrap().is_over());
        let (reply, _) = execute("counters", &mut r, &D, &mut Latency::new(), 10);
        assert!(reply.contains("\nrejected_bad_ticket 0\n"), "{reply}");
        assert!(reply.contains("\nmatches 2\n"), "{reply}");
        assert!(reply.contains("\nmatches_over 1\n"), "{reply}");
        assert!(reply.ends_with("\nok"), "{reply}");
        let mut latency = Latency::new();
        latency.datagram.record(40);
        let (reply, _) = execute("latency reset", &mut r, &D, &mut latency, 10);
        assert!(reply.starts_with("datagram count 1 p50_us 40 "), "{reply}");
        assert!(reply.ends_with("\nok"), "{reply}");
        let (reply, _) = execute("latency", &mut r, &D, &mut latency, 10);
        assert!(reply.starts_with("datagram count 0 "), "{reply}");
    }

    #[test]
    fn bad_commands_get_one_error_line_and_change_nothing() {
        let mut r = relay();
        execute(
            "create 7 seats 3 humans 0,1",
            &mut r,
            &D,
            &mut Latency::new(),
            0,
        );
        for (command, expected) in [
            ("create 7 seats 3 humans 0", "error match 7: "),
            ("create 9 seats 3", "error create: missing `humans LIST`"),
            (
                "create 9 seats 2 humans 0 colour blue",
                "error create: unknown key `colour`",
            ),
            ("create", "error create: "),
            ("end 99", "error no match 99"),
            ("end x", "error end needs a match id, got `x`"),
            ("list all", "error list takes no arguments, got `all`"),
            (
                "frobnicate 3",
                "error unknown command `frobnicate`; try help",
            ),
            ("", "error empty command; try help"),
        ] {
            let (reply, effect) = execute(command, &mut r, &D, &mut Latency::new(), 0);
            assert!(reply.starts_with(expected), "{command:?}: {reply}");
            assert!(!reply.contains('\n'), "one line: {reply}");
            assert_eq!(effect, Effect::None);
        }
        assert_eq!(r.match_count(), 1);
        assert!(!r.sequencer(7).unwrap().is_over());
    }

    #[test]
    fn snake_case_names() {
        assert_eq!(snake_case("BadTicket"), "bad_ticket");
        assert_eq!(snake_case("RelayFull"), "relay_full");
    }
}
