//! The transport over real UDP sockets on the loopback interface: two
//! endpoints in one process (IPv4, IPv6, dual-stack, worker thread), and two
//! processes (this test binary spawns itself as the second one).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rungs_core::link::{Endpoint, EndpointConfig, LinkConfig};
use rungs_core::wire::SessionKey;
use rungs_net::{MonotonicClock, UdpDriver, Worker};

const KEY: SessionKey = SessionKey(*b"udp-loopback-key");
const SESSION: u32 = 0x0DD_BA11;
const MESSAGES: u32 = 300;
/// Every loop here gives up after this long rather than hang a test run.
const DEADLINE: Duration = Duration::from_secs(20);

fn driver(seat: u8, bind: &str) -> UdpDriver {
    let endpoint = Endpoint::new(EndpointConfig {
        session_id: SESSION,
        key: KEY,
        local_seat: seat,
        link: LinkConfig::default(),
    })
    .unwrap();
    UdpDriver::bind(bind.parse().unwrap(), endpoint).unwrap()
}

/// The address a peer on the loopback should use to reach `driver`.
fn loopback_address(driver: &UdpDriver, loopback: &str) -> SocketAddr {
    SocketAddr::new(
        loopback.parse().unwrap(),
        driver.local_addr().unwrap().port(),
    )
}

fn message(seat: u8, i: u32) -> Vec<u8> {
    let mut m = vec![seat];
    m.extend_from_slice(&i.to_le_bytes());
    m.resize(24, b'.');
    m
}

/// Queue MESSAGES numbered messages to `peer`, a few per frame as a game would.
struct Exchange {
    seat: u8,
    peer: u8,
    next_to_send: u32,
    next_expected: u32,
}

impl Exchange {
    fn new(seat: u8, peer: u8) -> Exchange {
        Exchange {
            seat,
            peer,
            next_to_send: 0,
            next_expected: 0,
        }
    }

    /// One frame: send up to 10 messages, poll, check what arrived in order.
    fn frame(&mut self, driver: &mut UdpDriver, now_us: u64) {
        for _ in 0..10 {
            if self.next_to_send < MESSAGES {
                driver
                    .endpoint_mut()
                    .send(self.peer, &message(self.seat, self.next_to_send))
                    .unwrap();
                self.next_to_send += 1;
            }
        }
        driver.poll(now_us);
        while let Some((from, bytes)) = driver.endpoint_mut().recv() {
            assert_eq!(from, self.peer);
            assert_eq!(
                bytes,
                message(self.peer, self.next_expected),
                "in order, once"
            );
            self.next_expected += 1;
        }
    }

    fn done(&self, driver: &UdpDriver) -> bool {
        let link = driver.endpoint().link(self.peer).unwrap();
        self.next_expected == MESSAGES
            && self.next_to_send == MESSAGES
            && link.stats(0).messages_in_flight == 0
    }
}

fn exchange_in_one_process(
    mut a: UdpDriver,
    mut b: UdpDriver,
    a_addr: SocketAddr,
    b_addr: SocketAddr,
) {
    a.endpoint_mut().add_peer(1, b_addr, 0).unwrap();
    b.endpoint_mut().add_peer(0, a_addr, 0).unwrap();
    let clock = MonotonicClock::starting_at(0);
    let (mut xa, mut xb) = (Exchange::new(0, 1), Exchange::new(1, 0));
    let start = Instant::now();
    while !(xa.done(&a) && xb.done(&b)) {
        assert!(start.elapsed() < DEADLINE, "exchange did not finish");
        xa.frame(&mut a, clock.now_us());
        xb.frame(&mut b, clock.now_us());
        std::thread::sleep(Duration::from_millis(1));
    }
    for (driver, peer) in [(&a, 1), (&b, 0)] {
        let stats = driver.endpoint().link(peer).unwrap().stats(clock.now_us());
        assert!(stats.clean_measurement);
        assert!(
            stats.srtt_us.unwrap() < 500_000,
            "loopback is fast: {stats:?}"
        );
        assert_eq!(stats.messages_delivered, u64::from(MESSAGES));
        assert_eq!(stats.dropped.total(), 0);
        assert_eq!(driver.endpoint().unattributed_drops().total(), 0);
    }
}

#[test]
fn two_sockets_in_one_process_over_ipv4() {
    let a = driver(0, "127.0.0.1:0");
    let b = driver(1, "127.0.0.1:0");
    let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    exchange_in_one_process(a, b, a_addr, b_addr);
}

#[test]
fn two_sockets_in_one_process_over_ipv6_and_dual_stack() {
    let endpoint = Endpoint::new(EndpointConfig {
        session_id: SESSION,
        key: KEY,
        local_seat: 0,
        link: LinkConfig::default(),
    })
    .unwrap();
    let Ok(a) = UdpDriver::bind("[::1]:0".parse().unwrap(), endpoint) else {
        eprintln!("no IPv6 loopback on this machine; IPv6 part not run");
        return;
    };
    let b = driver(1, "[::1]:0");
    let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    exchange_in_one_process(a, b, a_addr, b_addr);

    // A dual-stack socket ([::]) talking to an IPv4-only one: the IPv4 peer
    // shows up as ::ffff:127.0.0.1 and must still match its bound address.
    let dual = driver(0, "[::]:0");
    let v4 = driver(1, "127.0.0.1:0");
    let dual_addr = loopback_address(&dual, "127.0.0.1");
    let v4_addr = v4.local_addr().unwrap();
    exchange_in_one_process(dual, v4, dual_addr, v4_addr);
}

#[test]
fn a_worker_thread_drives_one_side() {
    let mut a = driver(0, "127.0.0.1:0");
    let mut b = driver(1, "127.0.0.1:0");
    let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    a.endpoint_mut().add_peer(1, b_addr, 0).unwrap();
    b.endpoint_mut().add_peer(0, a_addr, 0).unwrap();
    let clock = MonotonicClock::starting_at(0);
    let worker = Worker::start(a, Duration::from_millis(1), clock).unwrap();
    for i in 0..50 {
        worker
            .lock()
            .endpoint_mut()
            .send(1, &message(0, i))
            .unwrap();
    }
    let start = Instant::now();
    let mut got = 0;
    while got < 50 {
        assert!(start.elapsed() < DEADLINE, "worker did not deliver");
        b.poll(clock.now_us());
        while let Some((0, bytes)) = b.endpoint_mut().recv() {
            assert_eq!(bytes, message(0, got));
            got += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // Acks flow back to the worker's side without the engine polling it.
    let start = Instant::now();
    while worker
        .lock()
        .endpoint()
        .link(1)
        .unwrap()
        .stats(0)
        .messages_in_flight
        > 0
    {
        assert!(start.elapsed() < DEADLINE, "acks never reached the worker");
        b.poll(clock.now_us());
        std::thread::sleep(Duration::from_millis(1));
    }
    let a = worker.stop().unwrap();
    assert!(a.endpoint().link(1).unwrap().has_clean_measurement());
}

/// Environment variable that makes `two_process_child` run (it holds the
/// parent's port).
const CHILD_ENV: &str = "RUNGS_TRANSPORT_TEST_PARENT_PORT";

/// Run one side of the two-process exchange until it is done and the other
/// side has had time to hear our last acks.
fn run_side(mut driver: UdpDriver, seat: u8, peer: u8) {
    let clock = MonotonicClock::starting_at(0);
    let mut exchange = Exchange::new(seat, peer);
    let start = Instant::now();
    while !exchange.done(&driver) {
        assert!(
            start.elapsed() < DEADLINE,
            "seat {seat}: exchange did not finish"
        );
        exchange.frame(&mut driver, clock.now_us());
        std::thread::sleep(Duration::from_millis(1));
    }
    let linger = Instant::now();
    while linger.elapsed() < Duration::from_millis(300) {
        exchange.frame(&mut driver, clock.now_us());
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(driver
        .endpoint()
        .link(peer)
        .unwrap()
        .has_clean_measurement());
}

#[test]
fn two_processes_exchange_messages() {
    let mut parent = driver(0, "127.0.0.1:0");
    let parent_port = parent.local_addr().unwrap().port();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "two_process_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, parent_port.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let child_port: u16 = loop {
        let line = lines.next().expect("child exited before its port").unwrap();
        // The harness may have printed "test two_process_child ... " first.
        if let Some(at) = line.find("CHILD_PORT ") {
            break line[at + "CHILD_PORT ".len()..].trim().parse().unwrap();
        }
    };
    // Keep draining the child's output so it can never block on a full pipe.
    let drain = std::thread::spawn(move || lines.count());
    parent
        .endpoint_mut()
        .add_peer(1, SocketAddr::from(([127, 0, 0, 1], child_port)), 0)
        .unwrap();
    run_side(parent, 0, 1);
    let status = child.wait().unwrap();
    drain.join().unwrap();
    assert!(status.success(), "child process failed: {status}");
}

/// The second process of `two_processes_exchange_messages`; not run alone.
#[test]
#[ignore = "spawned by two_processes_exchange_messages"]
fn two_process_child() {
    let parent_port: u16 = std::env::var(CHILD_ENV)
        .expect("run by two_processes_exchange_messages")
        .parse()
        .unwrap();
    let mut driver = driver(1, "127.0.0.1:0");
    driver
        .endpoint_mut()
        .add_peer(0, SocketAddr::from(([127, 0, 0, 1], parent_port)), 0)
        .unwrap();
    println!("CHILD_PORT {}", driver.local_addr().unwrap().port());
    run_side(driver, 1, 0);
}
