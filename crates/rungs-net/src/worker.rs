//! The optional worker thread (S7: the library starts no thread unless the
//! engine asks). It polls a [`UdpDriver`] on its own clock every tick; the
//! engine reaches the driver through [`Worker::lock`] and gets it back with
//! [`Worker::stop`]. A panic on the worker thread is caught there, stops
//! the polling, and is reported through [`Worker::status`].

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

use super::udp::UdpDriver;
use rungs_core::error::{Error, Result};
use rungs_core::io::Datagrams;
use rungs_core::link::Endpoint;

/// A monotonic microsecond clock that starts at a chosen value, so a worker
/// can continue the timeline the engine's clock was on.
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: Instant,
    start_us: u64,
}

impl MonotonicClock {
    /// A clock reading `start_us` now.
    pub fn starting_at(start_us: u64) -> MonotonicClock {
        MonotonicClock {
            origin: Instant::now(),
            start_us,
        }
    }

    /// Microseconds: `start_us` plus the time elapsed since creation.
    pub fn now_us(&self) -> u64 {
        let elapsed = u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.start_us.saturating_add(elapsed)
    }
}

/// How the worker thread is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerStatus {
    /// Polling every tick.
    Running,
    /// Stopped by [`Worker::stop`] (or being dropped).
    Stopped,
    /// A poll panicked; the thread caught it and stopped polling. The
    /// driver is intact as far as memory goes and can be taken back with
    /// [`Worker::stop`], but the transport made no progress since.
    Panicked,
}

const RUNNING: u8 = 0;
const STOPPED: u8 = 1;
const PANICKED: u8 = 2;

/// A running worker thread and the driver it polls.
#[derive(Debug)]
pub struct Worker<D: Datagrams + Send + 'static = Endpoint> {
    driver: Arc<Mutex<UdpDriver<D>>>,
    stop: Arc<AtomicBool>,
    status: Arc<AtomicU8>,
    thread: Option<JoinHandle<()>>,
    clock: MonotonicClock,
}

impl<D: Datagrams + Send + 'static> Worker<D> {
    /// Start a thread that polls `driver` every `tick` on `clock`.
    pub fn start(driver: UdpDriver<D>, tick: Duration, clock: MonotonicClock) -> Result<Worker<D>> {
        if tick.is_zero() {
            return Err(Error::invalid_value("tick", "zero", "a positive duration"));
        }
        let driver = Arc::new(Mutex::new(driver));
        let stop = Arc::new(AtomicBool::new(false));
        let status = Arc::new(AtomicU8::new(RUNNING));
        let thread = std::thread::Builder::new()
            .name("rungs-transport".into())
            .spawn({
                let driver = Arc::clone(&driver);
                let stop = Arc::clone(&stop);
                let status = Arc::clone(&status);
                move || {
                    while !stop.load(Ordering::Acquire) {
                        // The guard unlocks on unwind too (parking_lot does
                        // not poison), so the engine's next call still works.
                        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            driver.lock().poll(clock.now_us());
                        }));
                        if polled.is_err() {
                            status.store(PANICKED, Ordering::Release);
                            return;
                        }
                        std::thread::sleep(tick);
                    }
                    status.store(STOPPED, Ordering::Release);
                }
            })
            .map_err(Error::from)?;
        Ok(Worker {
            driver,
            stop,
            status,
            thread: Some(thread),
            clock,
        })
    }

    /// The driver, locked against the worker for as long as the guard lives.
    pub fn lock(&self) -> MutexGuard<'_, UdpDriver<D>> {
        self.driver.lock()
    }

    /// The worker's clock (pass its `now_us` to stats and flags).
    pub fn clock(&self) -> MonotonicClock {
        self.clock
    }

    /// Whether the thread is polling, stopped, or stopped by a panic.
    pub fn status(&self) -> WorkerStatus {
        match self.status.load(Ordering::Acquire) {
            RUNNING => WorkerStatus::Running,
            PANICKED => WorkerStatus::Panicked,
            _ => WorkerStatus::Stopped,
        }
    }

    /// Stop and join the thread and take the driver back.
    pub fn stop(mut self) -> Result<UdpDriver<D>> {
        self.halt();
        let driver = Arc::clone(&self.driver);
        drop(self);
        // The thread is joined and `self` is gone, so this is the last owner.
        match Arc::try_unwrap(driver) {
            Ok(mutex) => Ok(mutex.into_inner()),
            Err(_) => Err(Error::State("transport worker still holds the driver")),
        }
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            // A panic in the thread was caught there and is in `status`.
            let _ = thread.join();
        }
    }
}

impl<D: Datagrams + Send + 'static> Drop for Worker<D> {
    fn drop(&mut self) {
        self.halt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rungs_core::link::Transmit;
    use std::net::SocketAddr;

    /// A state machine whose timer handling panics on the third poll.
    struct Faulty {
        polls: u32,
    }

    impl Datagrams for Faulty {
        fn handle_datagram(&mut self, _: u64, _: SocketAddr, _: &[u8]) {}
        fn handle_timeout(&mut self, _: u64) {
            self.polls += 1;
            if self.polls == 3 {
                panic!("a bug in a poll");
            }
        }
        fn poll_transmit(&mut self, _: u64, _: &mut [u8]) -> Option<Transmit> {
            None
        }
    }

    #[test]
    fn a_panic_on_the_worker_thread_is_caught_and_reported() {
        let driver =
            UdpDriver::bind(SocketAddr::from(([127, 0, 0, 1], 0)), Faulty { polls: 0 }).unwrap();
        let worker = Worker::start(
            driver,
            Duration::from_millis(1),
            MonotonicClock::starting_at(0),
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while worker.status() == WorkerStatus::Running && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(worker.status(), WorkerStatus::Panicked);
        // The lock is not poisoned and the driver comes back.
        assert_eq!(worker.lock().inner().polls, 3);
        let driver = worker.stop().unwrap();
        assert_eq!(driver.inner().polls, 3);
    }
}
