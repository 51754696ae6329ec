//! The `rungs-relay` binary as a child process, for loopback tests: issue
//! tickets with it, and serve matches from a setup file on a port the OS
//! picks.

// Each test binary uses a part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, Command, Stdio};

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
    /// relay's own temporary folder.
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
            address,
            dir,
        }
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

    /// SIGTERM, wait, and return whether it exited cleanly and the rest of its log.
    pub fn stop(mut self) -> (bool, String) {
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let status = self.child.wait().unwrap();
        let rest: Vec<String> = self.log.lines().map_while(Result::ok).collect();
        let _ = std::fs::remove_dir_all(&self.dir);
        (status.success(), rest.join("\n"))
    }
}
