//! The `rungs-relay` binary as a child process, for loopback tests: issue
//! tickets with it, and serve matches from a setup file on a port the OS
//! picks.

// Each test binary uses a part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::{Duration, Instant};

use rungs_core::relay::ticket::Credentials;

pub const BIN: &str = env!("CARGO_BIN_EXE_rungs-relay");

/// A ticket for `seat` of `match_id`, issued by `rungs-relay ticket`.
pub fn ticket(secret: &str, match_id: u64, seat: u8) -> Credentials {
    let out = Command::new(BIN)
        .args(["ticket", "--secret", secret, "--match"])
        .arg(match_id.to_string())
        .arg("--seat")
        .arg(seat.to_string())
        .output()
        .unwrap();
    assert!(out.status.success());
    Credentials::from_text(&String::from_utf8(out.stdout).unwrap()).unwrap()
}

/// A running relay: the child, its log, its address, its setup file's folder.
pub struct RelayProcess {
    pub child: Child,
    pub log: BufReader<ChildStderr>,
    /// Log lines read before the end (looking for one).
    read: Vec<String>,
    pub address: SocketAddr,
    pub dir: PathBuf,
}

impl RelayProcess {
    /// Serve the matches of `setup` (setup-file lines) on 127.0.0.1.
    pub fn serve(name: &str, secret: &str, setup: &str) -> RelayProcess {
        RelayProcess::serve_with(name, secret, Some(setup), &[])
    }

    /// Serve on 127.0.0.1 with a setup file holding `setup` (if any) and
    /// `extra` arguments; `{dir}` in an argument is replaced by the
    /// relay's own temporary folder. Its drain lasts 0 s unless `extra`
    /// says `--drain-seconds`: SIGTERM ends the matches still going at once.
    pub fn serve_with(
        name: &str,
        secret: &str,
        setup: Option<&str>,
        extra: &[&str],
    ) -> RelayProcess {
        let dir = std::env::temp_dir().join(format!("rungs-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut command = Command::new(BIN);
        command.args(["serve", "--listen", "127.0.0.1:0"]);
        if let Some(setup) = setup {
            let matches = dir.join("matches.txt");
            std::fs::write(&matches, setup).unwrap();
            command.arg("--matches").arg(&matches);
        }
        for arg in extra {
            command.arg(arg.replace("{dir}", &dir.to_string_lossy()));
        }
        let mut child = command
            .env("RUNGS_RELAY_SECRET", secret)
            .env("RUNGS_RELAY_LOAD_WAIT_SECONDS", "5")
            .env("RUNGS_RELAY_DRAIN_SECONDS", "0")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut log = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        log.read_line(&mut line).unwrap();
        let address: SocketAddr = line
            .trim()
            .rsplit(' ')
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        RelayProcess {
            child,
            log,
            read: Vec::new(),
            address,
            dir,
        }
    }

    /// The address of `--metrics`, from the log line saying it.
    pub fn metrics_address(&mut self) -> SocketAddr {
        loop {
            let mut line = String::new();
            assert!(self.log.read_line(&mut line).unwrap() > 0, "log ended");
            self.read.push(line.trim_end().to_string());
            if let Some(rest) = line.split("metrics at ").nth(1) {
                return rest.split(' ').next().unwrap().parse().unwrap();
            }
        }
    }

    /// Send `signal` (SIGTERM, SIGINT) to the relay.
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: a plain signal to our own child.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, signal);
        }
    }

    /// Wait up to `timeout` for the relay to exit (SIGKILL and panic if
    /// it does not): its exit code and its whole log.
    pub fn wait_exit(mut self, timeout: Duration) -> (Option<i32>, String) {
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > timeout {
                self.kill9();
                panic!("the relay did not exit within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut lines = std::mem::take(&mut self.read);
        lines.extend(self.log.lines().map_while(Result::ok));
        let _ = std::fs::remove_dir_all(&self.dir);
        (status.code(), lines.join("\n"))
    }

    /// SIGKILL and wait, as a crash would: nothing of the process's own
    /// shutdown runs; its folder stays for the relay started after it.
    pub fn kill9(&mut self) {
        // SAFETY: a plain signal to our own child.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }

    /// SIGTERM and wait: its exit code (0: every match had finished; 3:
    /// the drain ended some, at once unless `--drain-seconds` was given)
    /// and its log.
    pub fn stop(self) -> (Option<i32>, String) {
        self.signal(libc::SIGTERM);
        self.wait_exit(Duration::from_secs(60))
    }
}
