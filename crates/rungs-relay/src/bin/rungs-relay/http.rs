//! The `--metrics` HTTP listener: `GET /metrics` (OpenMetrics text) and
//! `GET /health` (200 while serving, 503 while draining or stalled), 404 for
//! any other path. HTTP/1.1, one request per connection (`Connection:
//! close`): what a Prometheus scraper, a load balancer's health check and
//! `curl` send, with no HTTP crate.
//!
//! None of it runs on the relay's thread: one thread accepts, one thread
//! per connection reads the request and writes the answer from what the
//! serving loop published (`metrics.rs`). A request head is at most
//! [`MAX_REQUEST_BYTES`] and must arrive within [`REQUEST_TIMEOUT`]
//! however slowly it trickles; answers are written with the same timeout;
//! at most [`MAX_CONNECTIONS`] are served at once and further ones get a
//! 503 at once. So a slow or stuck client holds one place for two seconds
//! at most, and never the relay.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::metrics::{Health, Shared, CONTENT_TYPE};

/// Longest request head (request line and headers) read, bytes.
pub const MAX_REQUEST_BYTES: usize = 8192;
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 8;
/// Time for a whole request head to arrive, and for an answer to be written.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// An answer: status line, content type and body.
#[derive(Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Response {
    fn text(status: u16, body: impl Into<String>) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
        }
    }

    fn reason(&self) -> &'static str {
        match self.status {
            200 => "OK",
            400 => "Bad Request",
            404 => "Not Found",
            405 => "Method Not Allowed",
            408 => "Request Timeout",
            431 => "Request Header Fields Too Large",
            503 => "Service Unavailable",
            _ => "",
        }
    }

    /// The whole HTTP/1.1 message (the body left out for HEAD).
    fn bytes(&self, with_body: bool) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n",
            self.status,
            self.reason(),
            self.content_type,
            self.body.len(),
            if self.status == 405 {
                "Allow: GET, HEAD\r\n"
            } else {
                ""
            },
        )
        .into_bytes();
        if with_body {
            out.extend_from_slice(self.body.as_bytes());
        }
        out
    }
}

/// The answer to a request head `head` (everything before the blank line).
pub fn answer(head: &str, shared: &Shared) -> (Response, bool) {
    let mut words = head.lines().next().unwrap_or("").split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return (Response::text(400, "bad request line\n"), true);
    };
    if !version.starts_with("HTTP/1.") {
        return (Response::text(400, "HTTP/1.x only\n"), true);
    }
    let with_body = method != "HEAD";
    if method != "GET" && method != "HEAD" {
        return (Response::text(405, "GET or HEAD\n"), true);
    }
    let path = target.split('?').next().unwrap_or("");
    let response = match path {
        "/metrics" => Response {
            status: 200,
            content_type: CONTENT_TYPE,
            body: shared.encode(),
        },
        "/health" => match shared.health() {
            Health::Serving => Response::text(200, "serving\n"),
            Health::Draining => Response::text(503, "draining\n"),
            Health::Stalled => Response::text(503, "stalled: the relay loop is not running\n"),
        },
        _ => Response::text(404, "not found: /metrics and /health are served\n"),
    };
    (response, with_body)
}

/// Why a request head could not be read.
#[derive(Debug, PartialEq, Eq)]
enum ReadError {
    TooLarge,
    TimedOut,
    /// Closed, reset, or not text: nothing to answer.
    Gone,
}

/// Read up to the blank line ending the head, by `deadline`.
fn read_head(stream: &mut TcpStream, deadline: Instant) -> Result<String, ReadError> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadError::TimedOut);
        }
        // Each read waits only for what is left of the whole request's time.
        let _ = stream.set_read_timeout(Some(left));
        let n = match stream.read(&mut buf) {
            Ok(0) => return Err(ReadError::Gone),
            Ok(n) => n,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                return Err(ReadError::TimedOut)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(ReadError::Gone),
        };
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = head_end(&head) {
            head.truncate(end);
            return String::from_utf8(head).map_err(|_| ReadError::Gone);
        }
        if head.len() >= MAX_REQUEST_BYTES {
            return Err(ReadError::TooLarge);
        }
    }
}

/// Where the head ends (the blank line), if it has.
fn head_end(bytes: &[u8]) -> Option<usize> {
    let crlf = bytes.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = bytes.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn serve_connection(mut stream: TcpStream, shared: &Shared) {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let _ = stream.set_write_timeout(Some(REQUEST_TIMEOUT));
    let (response, with_body) = match read_head(&mut stream, deadline) {
        Ok(head) => answer(&head, shared),
        Err(ReadError::TooLarge) => (Response::text(431, "request head too large\n"), true),
        Err(ReadError::TimedOut) => (Response::text(408, "request too slow\n"), true),
        Err(ReadError::Gone) => return,
    };
    let _ = stream.write_all(&response.bytes(with_body));
    let _ = stream.flush();
}

/// Serve `listener` on threads of their own until the process exits.
pub fn spawn(listener: TcpListener, shared: Arc<Shared>) -> std::io::Result<()> {
    let active = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("metrics-http".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else {
                    // Out of descriptors or the like: do not spin.
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                };
                if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                    active.fetch_sub(1, Ordering::SeqCst);
                    // A short write into an empty socket buffer: no wait.
                    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
                    let busy = Response::text(503, "busy: too many connections\n");
                    let _ = stream.write_all(&busy.bytes(true));
                    continue;
                }
                let (shared, finished) = (shared.clone(), active.clone());
                let spawned = std::thread::Builder::new()
                    .name("metrics-conn".into())
                    .spawn(move || {
                        serve_connection(stream, &shared);
                        finished.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    // The closure (and its stream) is gone with the error.
                    active.fetch_sub(1, Ordering::SeqCst);
                }
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_methods_and_bad_requests() {
        let shared = Shared::new();
        let status = |head: &str| answer(head, &shared).0.status;
        assert_eq!(status("GET /metrics HTTP/1.1\r\nHost: x"), 200);
        assert_eq!(status("GET /metrics?name[]=x HTTP/1.0"), 200);
        assert_eq!(status("GET /health HTTP/1.1"), 200);
        assert_eq!(status("GET / HTTP/1.1"), 404);
        assert_eq!(status("GET /metricsx HTTP/1.1"), 404);
        assert_eq!(status("POST /metrics HTTP/1.1"), 405);
        assert_eq!(status("GET /metrics"), 400);
        assert_eq!(status("GET /metrics SPDY/3"), 400);
        assert_eq!(status(""), 400);
        let (head, with_body) = answer("HEAD /health HTTP/1.1", &shared);
        assert!(!with_body);
        let bytes = String::from_utf8(head.bytes(with_body)).unwrap();
        assert!(bytes.ends_with("Content-Length: 8\r\nConnection: close\r\n\r\n"));
        let metrics = answer("GET /metrics HTTP/1.1", &shared).0;
        assert_eq!(metrics.content_type, CONTENT_TYPE);
        assert!(metrics.body.ends_with("# EOF\n"), "{}", metrics.body);
    }

    #[test]
    fn the_head_ends_at_the_first_blank_line() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n\r\nbody"), Some(20));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\n"), Some(14));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n"), None);
    }

    #[test]
    fn a_slow_client_gets_408_and_an_oversized_one_431() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        spawn(listener, Arc::new(Shared::new())).unwrap();
        let mut silent = TcpStream::connect(address).unwrap();
        // Another client is answered while the silent one waits.
        let mut quick = TcpStream::connect(address).unwrap();
        quick.write_all(b"GET /nope HTTP/1.1\r\n\r\n").unwrap();
        let mut text = String::new();
        quick.read_to_string(&mut text).unwrap();
        assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"), "{text}");
        let mut text = String::new();
        silent.read_to_string(&mut text).unwrap();
        assert!(text.starts_with("HTTP/1.1 408 "), "{text}");
        let mut big = TcpStream::connect(address).unwrap();
        // Exactly the limit: nothing is left unread, so the close is clean.
        let _ = big.write_all(&[b'a'; MAX_REQUEST_BYTES]);
        let mut text = String::new();
        let _ = big.read_to_string(&mut text);
        assert!(text.starts_with("HTTP/1.1 431 "), "{text}");
    }
}
