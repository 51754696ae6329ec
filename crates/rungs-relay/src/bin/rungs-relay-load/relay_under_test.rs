//! The `rungs-relay` process under test, shared by `rungs-relay-load` and
//! `rungs-relay-attack` (Linux: taskset, chrt, `/proc`, a Unix-domain admin
//! socket): start it pinned, talk to its admin socket, read its CPU time
//! and memory, stop it however a run ends.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Pin this process (every thread it starts later too) to `cpu`.
pub fn pin_self(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes
    // inside it; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// User + system CPU seconds of process `pid`.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // After the command: state is field 3, utime 14 and stime 15 (1-based).
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some((utime + stime) as f64 / hz)
}

/// Resident memory of process `pid`, KiB (`VmRSS`).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// `v` as a number, or an error naming `flag`.
pub fn number(flag: &str, v: Option<String>) -> Result<u64, String> {
    v.as_deref()
        .and_then(|v| v.parse().ok())
        .ok_or(format!("{flag} needs a number"))
}

/// The flags both tools take about the relay they start and where they run.
pub struct LaunchFlags {
    /// `--relay PATH`: the binary (next to this one).
    pub relay: PathBuf,
    /// `--relay-cpu N`, `--load-cpu N` (0, 1); `--no-pin`: none.
    pub pin: Option<(usize, usize)>,
    /// `--realtime`.
    pub realtime: bool,
    /// `--relay-log PATH`.
    pub relay_log: Option<PathBuf>,
}

impl LaunchFlags {
    /// The defaults.
    pub fn new() -> Result<LaunchFlags, String> {
        Ok(LaunchFlags {
            relay: std::env::current_exe()
                .map_err(|e| e.to_string())?
                .with_file_name("rungs-relay"),
            pin: Some((0, 1)),
            realtime: false,
            relay_log: None,
        })
    }

    /// Take `flag` (and its value from `args`) if it is one of these;
    /// whether it was.
    pub fn take(
        &mut self,
        flag: &str,
        args: &mut impl Iterator<Item = String>,
    ) -> Result<bool, String> {
        match flag {
            "--relay" => self.relay = args.next().ok_or("--relay needs a path")?.into(),
            "--relay-cpu" => {
                let cpu = number(flag, args.next())? as usize;
                self.pin = self.pin.map(|(_, load)| (cpu, load));
            }
            "--load-cpu" => {
                let cpu = number(flag, args.next())? as usize;
                self.pin = self.pin.map(|(relay, _)| (relay, cpu));
            }
            "--no-pin" => self.pin = None,
            "--realtime" => self.realtime = true,
            "--relay-log" => {
                self.relay_log = Some(args.next().ok_or("--relay-log needs a path")?.into())
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// How to start the relay, with the lobby secret `secret_hex`.
    pub fn launch(&self, secret_hex: &'static str) -> Launch {
        Launch {
            relay: self.relay.clone(),
            realtime: self.realtime,
            cpu: self.pin.map(|(relay, _)| relay),
            log: self.relay_log.clone(),
            secret_hex,
        }
    }

    /// Pin this process and raise its priority as the flags say, and say so.
    pub fn apply_to_self(&self) {
        if self.realtime {
            // SCHED_FIFO below the relay's: the players' side keeps up on a
            // busy machine. (Its own sends are delivered in its own
            // context, so this does not starve them.)
            let param = libc::sched_param { sched_priority: 5 };
            // SAFETY: sched_setscheduler reads one sched_param we own;
            // failure (no privilege) keeps the normal policy.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
                println!(
                    "could not run SCHED_FIFO: {}",
                    std::io::Error::last_os_error()
                );
            }
        }
        if let Some((relay_cpu, load_cpu)) = self.pin {
            pin_self(load_cpu);
            println!("relay pinned to CPU {relay_cpu} (taskset), this process to CPU {load_cpu}");
        }
    }
}

/// How to start the relay: the binary, its scheduling and its log.
pub struct Launch {
    /// The `rungs-relay` binary.
    pub relay: PathBuf,
    /// Run it `SCHED_FIFO` (`chrt -f 10`).
    pub realtime: bool,
    /// Pin it to this core (`taskset -c`).
    pub cpu: Option<usize>,
    /// Keep its log there (else read and dropped).
    pub log: Option<PathBuf>,
    /// The lobby secret, 32 hex digits.
    pub secret_hex: &'static str,
}

/// The relay child: its admin connection and its address.
pub struct RelayUnderTest {
    pub child: Child,
    pub address: SocketAddr,
    admin_writer: UnixStream,
    admin_reader: BufReader<UnixStream>,
    dir: PathBuf,
}

impl RelayUnderTest {
    /// Start it on 127.0.0.1 with an admin socket, room for
    /// `max_connections`, and `extra` arguments; `tag` names its folder.
    pub fn start(
        o: &Launch,
        max_connections: usize,
        extra: &[&str],
        tag: &str,
    ) -> Result<RelayUnderTest, String> {
        let dir = std::env::temp_dir().join(format!("rungs-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let admin = dir.join("admin.sock");
        // chrt and taskset exec the next program: the child is the relay.
        let mut words: Vec<std::ffi::OsString> = Vec::new();
        if o.realtime {
            words.extend(["chrt".into(), "-f".into(), "10".into()]);
        }
        if let Some(cpu) = o.cpu {
            words.extend(["taskset".into(), "-c".into(), cpu.to_string().into()]);
        }
        words.push(o.relay.clone().into());
        let mut command = Command::new(&words[0]);
        command.args(&words[1..]);
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--admin"])
            .arg(&admin)
            .arg("--max-connections")
            .arg(max_connections.to_string())
            // Stopping a run (SIGTERM) ends its matches at once.
            .args(["--drain-seconds", "0"])
            .args(extra)
            .env("RUNGS_RELAY_SECRET", o.secret_hex)
            .env_remove("RUNGS_RELAY_MATCHES")
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .map_err(|e| format!("starting {}: {e}", o.relay.display()))?;
        let mut log = BufReader::new(child.stderr.take().ok_or("no stderr")?);
        let mut line = String::new();
        log.read_line(&mut line).map_err(|e| e.to_string())?;
        let address: SocketAddr = line
            .trim()
            .rsplit(' ')
            .next()
            .and_then(|a| a.parse().ok())
            .ok_or(format!("relay did not start: {line:?}"))?;
        // Keep reading its log (a line per connection) so it never blocks.
        let mut keep = match &o.log {
            Some(path) => {
                Some(std::fs::File::create(path).map_err(|e| format!("--relay-log: {e}"))?)
            }
            None => None,
        };
        std::thread::spawn(move || {
            for line in log.lines().map_while(Result::ok) {
                if let Some(file) = keep.as_mut() {
                    let _ = writeln!(file, "{line}");
                }
            }
        });
        let stream = connect(&admin)?;
        Ok(RelayUnderTest {
            child,
            address,
            admin_writer: stream.try_clone().map_err(|e| e.to_string())?,
            admin_reader: BufReader::new(stream),
            dir,
        })
    }

    /// Send one admin command; its data lines, or the error line.
    pub fn admin(&mut self, command: &str) -> Result<Vec<String>, String> {
        self.admin_writer
            .write_all(format!("{command}\n").as_bytes())
            .map_err(|e| e.to_string())?;
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            if self
                .admin_reader
                .read_line(&mut line)
                .map_err(|e| e.to_string())?
                == 0
            {
                return Err("admin socket closed".into());
            }
            let line = line.trim_end().to_string();
            if line.starts_with("ok") {
                return Ok(lines);
            }
            if line.starts_with("error") {
                return Err(format!("{command}: {line}"));
            }
            lines.push(line);
        }
    }

    /// `name value` lines as a map (counters), or `name k v k v` (latency).
    pub fn admin_fields(&mut self, command: &str) -> Result<HashMap<String, u64>, String> {
        let mut map = HashMap::new();
        for line in self.admin(command)? {
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.len() == 2 {
                map.insert(words[0].to_string(), words[1].parse().unwrap_or(0));
            } else {
                for pair in words[1..].chunks(2) {
                    if let [k, v] = pair {
                        map.insert(format!("{}.{k}", words[0]), v.parse().unwrap_or(0));
                    }
                }
            }
        }
        Ok(map)
    }

    pub fn stop(self) {
        drop(self);
    }
}

/// However a run ends (an error included), the relay is stopped and its
/// folder removed.
impl Drop for RelayUnderTest {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill sends a signal to our own, still running child.
            unsafe {
                libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
            }
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn connect(path: &Path) -> Result<UnixStream, String> {
    let start = Instant::now();
    loop {
        match UnixStream::connect(path) {
            Ok(s) => return Ok(s),
            Err(_) if start.elapsed() < Duration::from_secs(5) => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => return Err(format!("admin socket {}: {e}", path.display())),
        }
    }
}
