//! The panic and re-entry guard every export runs in.
//!
//! A library inside someone's game must not kill the game: a panic is caught
//! at the boundary, turned into `RUNGS_ERR_PANIC`, and the object it happened
//! in is *poisoned* (its state may be half-updated, so later calls refuse with
//! `RUNGS_ERR_POISONED`; `_free` still works).
//!
//! Re-entry: callbacks run while the object is borrowed mutably. A callback
//! that calls back into the same object gets `RUNGS_ERR_REENTRANT` before any
//! second reference to the state is created, so there is never aliasing.

use std::cell::{Cell, UnsafeCell};
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::result::{
    rungs_result, set_last_error, to_code, RUNGS_ERR_NULL_POINTER, RUNGS_ERR_PANIC,
    RUNGS_ERR_POISONED, RUNGS_ERR_REENTRANT,
};

/// The state behind an opaque C handle, plus the guard flags.
pub struct Guarded<T> {
    busy: Cell<bool>,
    poisoned: Cell<bool>,
    state: UnsafeCell<T>,
}

impl<T> Guarded<T> {
    /// Wrap `state` for an opaque handle.
    pub fn new(state: T) -> Self {
        Guarded {
            busy: Cell::new(false),
            poisoned: Cell::new(false),
            state: UnsafeCell::new(state),
        }
    }

    /// Whether a caught panic has poisoned this object.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.get()
    }
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
pub unsafe fn hand_out<H: Handle>(out: *mut *mut H, handle: H) -> crate::error::Result<()> {
    require(out, "out")?;
    // SAFETY: non-NULL (checked) and writable by contract.
    unsafe { write_out(out, Box::into_raw(Box::new(handle))) };
    Ok(())
}

/// Run `f` on the object behind `handle`, catching panics and refusing
/// NULL, poisoned and re-entrant calls.
///
/// # Safety
/// `handle` is NULL or a pointer obtained from [`hand_out`] that has not
/// been freed, used from one thread at a time.
pub unsafe fn with_object<H: Handle>(
    handle: *const H,
    f: impl FnOnce(&mut H::State) -> crate::error::Result<()>,
) -> rungs_result {
    if handle.is_null() {
        set_last_error("object handle is NULL");
        return RUNGS_ERR_NULL_POINTER;
    }
    // SAFETY: non-NULL and live by the caller's contract; only the Cells are touched
    // until `busy` proves no other borrow of `state` exists.
    let guarded = unsafe { (*handle).guarded() };
    if guarded.busy.get() {
        set_last_error("re-entrant call from inside a callback of the same object");
        return RUNGS_ERR_REENTRANT;
    }
    if guarded.poisoned.get() {
        set_last_error("object poisoned by an earlier panic; only _free works");
        return RUNGS_ERR_POISONED;
    }
    guarded.busy.set(true);
    // SAFETY: `busy` was false, so no other reference to `state` is alive; it stays
    // true for as long as this one is.
    let state = unsafe { &mut *guarded.state.get() };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        if PANIC_NEXT_CALL.with(|flag| flag.replace(false)) {
            panic!("panic injected by rungs_testing_panic_next_call");
        }
        f(state)
    }));
    guarded.busy.set(false);
    match outcome {
        Ok(result) => to_code(result),
        Err(_) => {
            guarded.poisoned.set(true);
            set_last_error("panic inside rungs; the object is poisoned");
            RUNGS_ERR_PANIC
        }
    }
}

thread_local! {
    static PANIC_NEXT_CALL: Cell<bool> = const { Cell::new(false) };
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

/// Free an object made by [`hand_out`]. NULL is accepted. Freeing from
/// inside one of the object's own callbacks is refused (`RUNGS_ERR_REENTRANT`)
/// because the object is still in use further up the stack.
///
/// # Safety
/// `handle` is NULL or a live pointer from [`hand_out`], not used after.
pub unsafe fn free_object<H: Handle>(handle: *mut H) -> rungs_result {
    if handle.is_null() {
        return super::result::RUNGS_OK;
    }
    // SAFETY: live by contract.
    if unsafe { (*handle).guarded().busy.get() } {
        set_last_error("cannot free an object from inside its own callback");
        return RUNGS_ERR_REENTRANT;
    }
    // Dropping user state must not unwind into C either.
    // SAFETY: the pointer came from Box::into_raw in `hand_out` and is not used again.
    let dropped = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(handle) })));
    match dropped {
        Ok(()) => super::result::RUNGS_OK,
        Err(_) => RUNGS_ERR_PANIC,
    }
}

/// Run a free function's body, catching panics.
pub fn catch(f: impl FnOnce() -> crate::error::Result<()>) -> rungs_result {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => to_code(result),
        Err(_) => {
            set_last_error("panic inside rungs");
            RUNGS_ERR_PANIC
        }
    }
}

/// Write `value` through an out-pointer that was checked non-NULL.
///
/// # Safety
/// `out` is valid for writes of `T`.
pub unsafe fn write_out<T>(out: *mut T, value: T) {
    // SAFETY: by contract.
    unsafe { out.write(value) }
}

/// Refuse a NULL pointer argument with a detail naming it.
pub fn require<T>(ptr: *const T, name: &'static str) -> crate::error::Result<()> {
    if ptr.is_null() {
        Err(crate::error::Error::NullPointer(name))
    } else {
        Ok(())
    }
}
