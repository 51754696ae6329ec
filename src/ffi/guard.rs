//! The panic and re-entry guard every export runs in.
//!
//! A library inside someone's game must not kill the game: a panic is caught
//! at the boundary, turned into `RUNGS_ERR_PANIC`, and the object it happened
//! in is *poisoned* (its state may be half-updated, so later calls refuse with
//! `RUNGS_ERR_POISONED`; `_free` still works).
//!
//! One call at a time per object: entering a call claims the object with an
//! atomic compare-exchange (acquire; leaving stores with release), before any
//! reference to the state exists, so there is never aliasing and never a data
//! race. A claim that fails was made either by this thread — a callback
//! calling back into the object it runs inside: `RUNGS_ERR_REENTRANT` — or by
//! another thread using the same handle at the same time: `RUNGS_ERR_BUSY`.
//! Either way the refused call changes nothing.
//!
//! The guard produces a typed outcome ([`super::result::Result`]); `result::finish`
//! turns it into the code and the thread's message. Nothing in `result`
//! depends on this module.

use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::result::{finish, rungs_result};
use super::result::{CallError, Result};

use super::args::{require, write_out};

/// The state behind an opaque C handle, plus the guard flags.
pub struct Guarded<T> {
    /// 0 while no call is inside the object, else the [`thread_mark`] of
    /// the thread whose call is.
    owner: AtomicUsize,
    poisoned: AtomicBool,
    state: UnsafeCell<T>,
}

impl<T> Guarded<T> {
    /// Wrap `state` for an opaque handle.
    pub fn new(state: T) -> Self {
        Guarded {
            owner: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
            state: UnsafeCell::new(state),
        }
    }

    /// Whether a caught panic has poisoned this object.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Claim the object for a call on this thread, or say who holds it.
    fn claim(&self) -> Result<()> {
        let me = thread_mark();
        match self
            .owner
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Ok(()),
            // Only this thread ever stores its own mark, so reading it back
            // means the claim is ours, further up this thread's stack.
            Err(holder) if holder == me => Err(CallError::Reentrant),
            Err(_) => Err(CallError::Busy),
        }
    }

    /// End the call that [`claim`](Self::claim) began.
    fn release(&self) {
        self.owner.store(0, Ordering::Release);
    }
}

thread_local! {
    static THREAD_MARK: u8 = const { 0 };
}

/// A non-zero number that tells the live threads apart: the address of a
/// thread-local (std's `ThreadId::as_u64` is not stable).
fn thread_mark() -> usize {
    THREAD_MARK.with(|mark| mark as *const u8 as usize)
}

/// An opaque handle type handed to C: `pub struct rungs_x(Guarded<State>)`.
pub trait Handle {
    type State;
    fn guarded(&self) -> &Guarded<Self::State>;
}

/// Box `handle` and write the pointer C will hold through `out` (refusing a
/// NULL `out`).
///
/// # Safety
/// `out` is NULL or valid for writes of a pointer.
pub unsafe fn hand_out<H: Handle>(out: *mut *mut H, handle: H) -> Result<()> {
    require(out, "out")?;
    // SAFETY: non-NULL (checked) and writable by contract.
    unsafe { write_out(out, Box::into_raw(Box::new(handle))) };
    Ok(())
}

/// The C function `function`'s call on the object behind `handle`: runs `f`
/// inside the guard (NULL, poisoned, re-entrant and concurrent calls refused,
/// panics caught) and returns its code, recording its message.
///
/// # Safety
/// `handle` is NULL or a pointer obtained from [`hand_out`] that has not
/// been freed.
pub unsafe fn object_call<H: Handle>(
    function: &'static str,
    handle: *const H,
    f: impl FnOnce(&mut H::State) -> Result<()>,
) -> rungs_result {
    // SAFETY: forwarded contract.
    finish(function, unsafe { enter(handle, f) })
}

/// Run `f` on the object behind `handle` inside the guard: the typed outcome.
///
/// # Safety
/// As [`object_call`].
pub unsafe fn enter<H: Handle>(
    handle: *const H,
    f: impl FnOnce(&mut H::State) -> Result<()>,
) -> Result<()> {
    require(handle, "the handle (first argument)")?;
    // SAFETY: non-NULL and live by the caller's contract; only the atomics are
    // touched until the claim proves no other reference to `state` exists.
    enter_guarded(unsafe { (*handle).guarded() }, f)
}

/// [`enter`] once the handle is resolved to its guarded state: for a handle
/// type that is not always one object's own state (measurements a session
/// lends, `measure.rs`).
pub fn enter_guarded<T>(guarded: &Guarded<T>, f: impl FnOnce(&mut T) -> Result<()>) -> Result<()> {
    guarded.claim()?;
    if guarded.is_poisoned() {
        guarded.release();
        return Err(CallError::Poisoned);
    }
    // SAFETY: the claim succeeded, so no other reference to `state` is alive;
    // it is held for as long as this one is.
    let state = unsafe { &mut *guarded.state.get() };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        if injected_panic_due() {
            panic!("panic injected by rungs_testing_panic_next_call");
        }
        f(state)
    }));
    if outcome.is_err() {
        guarded.poisoned.store(true, Ordering::Release);
    }
    guarded.release();
    outcome.unwrap_or(Err(CallError::Panic))
}

#[cfg(feature = "testing")]
thread_local! {
    static PANIC_NEXT_CALL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the harness asked for this call to panic: always false in what
/// ships, which has no hook and pays for no thread-local read.
#[cfg(feature = "testing")]
fn injected_panic_due() -> bool {
    PANIC_NEXT_CALL.with(|flag| flag.replace(false))
}

#[cfg(not(feature = "testing"))]
fn injected_panic_due() -> bool {
    false
}

/// For test harnesses only — never call this in a game. Makes the next call on
/// any object, on this thread, panic inside the library, so a harness can see
/// the panic caught (`RUNGS_ERR_PANIC`), the object poisoned (later calls
/// return `RUNGS_ERR_POISONED`) and `_free` still working.
///
/// Built only with the `testing` cargo feature (the C harness's build): what
/// ships does not export it, and `include/rungs.h` does not declare it
/// (`ffi-tests/harness.h` does).
#[cfg(feature = "testing")]
#[no_mangle]
pub extern "C" fn rungs_testing_panic_next_call() {
    PANIC_NEXT_CALL.with(|flag| flag.set(true));
}

/// The C function `function` freeing an object made by [`hand_out`]. NULL
/// is accepted. Refused while a call is inside the object: from one of its
/// own callbacks (`RUNGS_ERR_REENTRANT`, the object is still in use further
/// up the stack) or from another thread (`RUNGS_ERR_BUSY`).
///
/// # Safety
/// `handle` is NULL or a live pointer from [`hand_out`], not used after.
pub unsafe fn free_call<H: Handle>(function: &'static str, handle: *mut H) -> rungs_result {
    // SAFETY: forwarded contract.
    unsafe { free_with(function, handle, |h| Ok(h.guarded())) }
}

/// [`free_call`] for a handle whose guarded state `guarded` finds, or
/// refuses to free (an object another one lends: `measure.rs`).
///
/// # Safety
/// As [`free_call`].
pub unsafe fn free_with<H, T>(
    function: &'static str,
    handle: *mut H,
    guarded: impl FnOnce(&H) -> Result<&Guarded<T>>,
) -> rungs_result {
    if handle.is_null() {
        return finish(function, Ok(()));
    }
    // SAFETY: live by contract.
    if let Err(e) = guarded(unsafe { &*handle }).and_then(Guarded::claim) {
        return finish(function, Err(e));
    }
    // Dropping user state must not unwind into C either.
    // SAFETY: the pointer came from Box::into_raw in `hand_out` and is not used again.
    let dropped = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(handle) })));
    finish(function, dropped.map_err(|_| CallError::Panic))
}

/// The C function `function`'s call, for functions that take no object:
/// runs `f` catching panics and returns its code, recording its message.
pub fn call(function: &'static str, f: impl FnOnce() -> Result<()>) -> rungs_result {
    // Every object is made through here: the core's connection nonces get
    // their per-run entropy before the first link exists.
    crate::net::seed_connection_nonces();
    finish(
        function,
        catch_unwind(AssertUnwindSafe(f)).unwrap_or(Err(CallError::Panic)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::result::{RUNGS_ERR_BUSY, RUNGS_ERR_REENTRANT, RUNGS_OK};
    use std::sync::{Arc, Barrier};

    struct Counter(Guarded<u32>);

    impl Handle for Counter {
        type State = u32;
        fn guarded(&self) -> &Guarded<u32> {
            &self.0
        }
    }

    /// A raw handle that may cross threads, as a C handle does.
    #[derive(Clone, Copy)]
    struct Shared(*const Counter);
    // SAFETY: the guard is what makes concurrent use safe; that is under test.
    unsafe impl Send for Shared {}

    #[test]
    fn a_second_thread_gets_busy_and_changes_nothing() {
        let handle = Box::into_raw(Box::new(Counter(Guarded::new(0))));
        let shared = Shared(handle);
        let inside = Arc::new(Barrier::new(2));
        let tried = Arc::new(Barrier::new(2));
        let (inside2, tried2) = (inside.clone(), tried.clone());
        let holder = std::thread::spawn(move || {
            let shared = shared;
            // SAFETY: live until joined below.
            unsafe {
                object_call("test_hold", shared.0, |count| {
                    inside2.wait();
                    tried2.wait();
                    *count += 1;
                    Ok(())
                })
            }
        });
        inside.wait();
        // SAFETY: live; the other thread is inside a call.
        let refused = unsafe {
            object_call("test_add", handle.cast_const(), |count| {
                *count += 100;
                Ok(())
            })
        };
        assert_eq!(refused, RUNGS_ERR_BUSY);
        super::super::last_error::with(|text| {
            assert!(
                text.starts_with("test_add: another thread is inside a call"),
                "{text}"
            )
        });
        tried.wait();
        assert_eq!(holder.join().unwrap(), RUNGS_OK);
        // SAFETY: no other thread uses it now.
        unsafe {
            assert_eq!(
                object_call("test_read", handle.cast_const(), |count| {
                    assert_eq!(*count, 1);
                    Ok(())
                }),
                RUNGS_OK
            );
            assert_eq!(free_call("test_free", handle), RUNGS_OK);
        }
    }

    #[test]
    fn the_same_thread_gets_reentrant_and_may_call_again_after() {
        let handle = Box::into_raw(Box::new(Counter(Guarded::new(0))));
        let inner = std::cell::Cell::new(RUNGS_OK);
        // SAFETY: live until freed at the end.
        unsafe {
            let outer = object_call("test_outer", handle.cast_const(), |_| {
                inner.set(object_call("test_inner", handle.cast_const(), |_| Ok(())));
                assert_eq!(free_call("test_free", handle), RUNGS_ERR_REENTRANT);
                Ok(())
            });
            assert_eq!(outer, RUNGS_OK);
            assert_eq!(inner.get(), RUNGS_ERR_REENTRANT);
            assert_eq!(
                object_call("test_again", handle.cast_const(), |_| Ok(())),
                RUNGS_OK
            );
            assert_eq!(free_call("test_free", handle), RUNGS_OK);
        }
    }
}
