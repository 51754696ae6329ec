//! The optional worker thread (S7: the library starts no thread unless the
//! engine asks). It polls a [`UdpDriver`] on its own clock every tick; the
//! engine reaches the driver through [`Worker::lock`] and gets it back with
//! [`Worker::stop`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::udp::UdpDriver;
use crate::error::{Error, Result};

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

/// A running worker thread and the driver it polls.
#[derive(Debug)]
pub struct Worker {
    driver: Arc<Mutex<UdpDriver>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    clock: MonotonicClock,
}

impl Worker {
    /// Start a thread that polls `driver` every `tick` on `clock`.
    pub fn start(driver: UdpDriver, tick: Duration, clock: MonotonicClock) -> Result<Worker> {
        if tick.is_zero() {
            return Err(Error::InvalidArgument("worker tick must be positive"));
        }
        let driver = Arc::new(Mutex::new(driver));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new()
            .name("rungs-transport".into())
            .spawn({
                let driver = Arc::clone(&driver);
                let stop = Arc::clone(&stop);
                move || {
                    while !stop.load(Ordering::Acquire) {
                        lock(&driver).poll(clock.now_us());
                        std::thread::sleep(tick);
                    }
                }
            })
            .map_err(Error::from)?;
        Ok(Worker {
            driver,
            stop,
            thread: Some(thread),
            clock,
        })
    }

    /// The driver, locked against the worker for as long as the guard lives.
    pub fn lock(&self) -> MutexGuard<'_, UdpDriver> {
        lock(&self.driver)
    }

    /// The worker's clock (pass its `now_us` to stats and flags).
    pub fn clock(&self) -> MonotonicClock {
        self.clock
    }

    /// Stop and join the thread and take the driver back.
    pub fn stop(mut self) -> Result<UdpDriver> {
        self.halt();
        let driver = Arc::clone(&self.driver);
        drop(self);
        // The thread is joined and `self` is gone, so this is the last owner.
        match Arc::try_unwrap(driver) {
            Ok(mutex) => Ok(mutex.into_inner().unwrap_or_else(|e| e.into_inner())),
            Err(_) => Err(Error::State("transport worker still holds the driver")),
        }
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            // A panic in the thread was already contained there; nothing to add.
            let _ = thread.join();
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.halt();
    }
}

/// A poisoned lock means a poll panicked on the worker thread; the driver's
/// state is still memory-safe, and the endpoint's counters stay readable.
fn lock(driver: &Mutex<UdpDriver>) -> MutexGuard<'_, UdpDriver> {
    driver.lock().unwrap_or_else(|e| e.into_inner())
}
