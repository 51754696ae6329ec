//! Library and ABI versions.

/// The ABI version of this header. It changes only when an existing
/// declaration changes incompatibly; additions keep it.
pub const RUNGS_ABI_VERSION: u32 = 3;

/// The ABI version of the library actually loaded: compare it with
/// `RUNGS_ABI_VERSION` from the header you compiled against.
#[no_mangle]
pub extern "C" fn rungs_abi_version() -> u32 {
    RUNGS_ABI_VERSION
}

/// The library version, e.g. `"0.1.0"`. Static storage: never free it.
#[no_mangle]
pub extern "C" fn rungs_version() -> *const libc::c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
