//! Reading C arguments and writing C outputs: NULL checks, config structs,
//! pointer+length buffers, yes/no flags and ranges, each refused with a
//! message that names the argument or field and says what was got and what
//! was expected. Every file in `src/ffi` uses these instead of raw pointer
//! code of its own.

use std::fmt::Display;

use super::result::{CallError, Result};
use crate::error::Error;

/// Refuse a NULL pointer argument, naming it.
pub fn require<T>(ptr: *const T, name: &'static str) -> Result<()> {
    if ptr.is_null() {
        Err(CallError::NullPointer(name))
    } else {
        Ok(())
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

/// Write `value` through the out-pointer `name`, refusing NULL.
///
/// # Safety
/// `out` is NULL or valid for writes of `T`.
pub unsafe fn write_to<T>(out: *mut T, name: &'static str, value: T) -> Result<()> {
    require(out, name)?;
    // SAFETY: non-NULL (checked), valid for writes by contract.
    unsafe { out.write(value) };
    Ok(())
}

/// Write `value` through an optional out-pointer: NULL means the caller
/// does not want it.
///
/// # Safety
/// `out` is NULL or valid for writes of `T`.
pub unsafe fn write_optional<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: non-NULL, valid for writes by contract.
        unsafe { out.write(value) }
    }
}

/// Copy a C input struct out from behind a pointer, refusing NULL with `name`.
///
/// # Safety
/// `ptr` is NULL or valid for reads of `T`.
pub unsafe fn read_in<T: Copy>(ptr: *const T, name: &'static str) -> Result<T> {
    require(ptr, name)?;
    // SAFETY: non-NULL (checked) and valid for reads by the caller's contract.
    Ok(unsafe { ptr.read() })
}

/// Copy an optional C input struct from behind a pointer: NULL gives `None`.
///
/// # Safety
/// `ptr` is NULL or valid for reads of `T`.
pub unsafe fn read_optional<T: Copy>(ptr: *const T) -> Option<T> {
    // SAFETY: non-NULL (checked) and valid for reads by the caller's contract.
    (!ptr.is_null()).then(|| unsafe { ptr.read() })
}

/// Copy a config struct whose first field is `uint32_t struct_size` out from
/// behind `ptr`. The size is checked before the rest is read: a caller built
/// against an older, smaller struct is refused instead of read past its end;
/// a newer, larger one is accepted and its extra fields are ignored.
///
/// # Safety
/// `ptr` is NULL or valid for reads of `struct_size` bytes.
pub unsafe fn read_config<T: Copy>(ptr: *const T, name: &'static str) -> Result<T> {
    require(ptr, name)?;
    // SAFETY: every config struct starts with a u32 struct_size; ptr is readable.
    let struct_size = unsafe { ptr.cast::<u32>().read_unaligned() };
    let needed = std::mem::size_of::<T>();
    if (struct_size as usize) < needed {
        let c_name = c_struct_name::<T>();
        return Err(Error::invalid_value(
            format!("{name}->struct_size"),
            struct_size,
            format!(
                "at least sizeof({c_name}) = {needed} in this library's rungs.h (set it to \
                 sizeof the struct)"
            ),
        )
        .into());
    }
    // SAFETY: the caller vouches for struct_size >= size_of::<T>() readable bytes.
    Ok(unsafe { ptr.read() })
}

/// The C struct's name: the last segment of the Rust path of `T` (the C
/// structs keep their C names in Rust).
fn c_struct_name<T>() -> &'static str {
    let type_name = std::any::type_name::<T>();
    type_name.rsplit("::").next().unwrap_or(type_name)
}

/// Check an out-struct the caller sizes (`out->struct_size`, set before the
/// call) before anything is written to it: `out` non-NULL and its
/// `struct_size` exactly this library's `sizeof(T)`. Returns that size.
///
/// # Safety
/// `out` is NULL or valid for reads of its first four bytes, a `u32`
/// `struct_size` as every such struct starts.
pub unsafe fn require_sized_out<T>(out: *mut T, name: &'static str) -> Result<u32> {
    require(out, name)?;
    // SAFETY: non-NULL; its first four bytes are readable by contract.
    let struct_size = unsafe { out.cast::<u32>().read_unaligned() };
    let expected = std::mem::size_of::<T>();
    if struct_size as usize != expected {
        return Err(Error::invalid_value(
            format!("{name}->struct_size"),
            struct_size,
            format!(
                "sizeof({}) = {expected} (set it before the call)",
                c_struct_name::<T>()
            ),
        )
        .into());
    }
    Ok(struct_size)
}

/// [`read_config`] for a struct that grew: a caller built against an older
/// header, whose `struct_size` is at least `since` (the offset of the first
/// of the newest fields), has the fields before `since` read and the newer
/// ones zero — each new field's documented default. Smaller sizes are
/// refused as [`read_config`] refuses them.
///
/// # Safety
/// `ptr` is NULL or valid for reads of `struct_size` bytes; every field of
/// `T` is valid when all its bytes are zero (integers, raw pointers and
/// optional function pointers).
pub unsafe fn read_grown_config<T: Copy>(
    ptr: *const T,
    name: &'static str,
    since: usize,
) -> Result<T> {
    require(ptr, name)?;
    // SAFETY: every config struct starts with a u32 struct_size; ptr is readable.
    let struct_size = unsafe { ptr.cast::<u32>().read_unaligned() } as usize;
    let full = std::mem::size_of::<T>();
    if struct_size >= full {
        // SAFETY: forwarded contract; the full struct is readable.
        return unsafe { read_config(ptr, name) };
    }
    if struct_size < since {
        let c_name = c_struct_name::<T>();
        return Err(Error::invalid_value(
            format!("{name}->struct_size"),
            struct_size,
            format!(
                "at least sizeof({c_name}) = {full} in this library's rungs.h, or {since} from \
                 an older one (set it to sizeof the struct)"
            ),
        )
        .into());
    }
    let mut value = std::mem::MaybeUninit::<T>::zeroed();
    // Only the fields before `since`: an older struct's size counts its
    // tail padding, which the newer fields may now occupy, and a caller
    // need not have zeroed it.
    // SAFETY: `since <= struct_size` bytes are readable (contract) and fit
    // in `T`; the rest stays zero, valid for `T` by contract.
    unsafe {
        std::ptr::copy_nonoverlapping(ptr.cast::<u8>(), value.as_mut_ptr().cast::<u8>(), since);
        Ok(value.assume_init())
    }
}

/// The offset of a field in a `#[repr(C)]` struct (what
/// [`read_grown_config`]'s `since` is for the first field a struct grew by).
macro_rules! field_offset {
    ($type:ty, $field:ident) => {{
        let value = std::mem::MaybeUninit::<$type>::uninit();
        let base = value.as_ptr();
        // SAFETY: only the address is taken; nothing is read.
        let field = unsafe { std::ptr::addr_of!((*base).$field) };
        field as usize - base as usize
    }};
}
pub(crate) use field_offset;

/// The C buffer `ptr` of `len` elements as a slice. NULL is accepted for an
/// empty buffer (`len` 0, giving `&[]`); NULL with `len > 0` is refused,
/// naming `name`.
///
/// # Safety
/// `ptr` is NULL or valid for reads of `len` elements for `'a`.
pub unsafe fn slice_in<'a, T>(ptr: *const T, len: usize, name: &'static str) -> Result<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(CallError::NullWithLength { name, len });
    }
    // SAFETY: non-NULL, `len` readable elements by contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// The writable C buffer `ptr` of `len` elements as a slice, with the same
/// NULL rule as [`slice_in`].
///
/// # Safety
/// `ptr` is NULL or valid for writes of `len` elements for `'a`, not aliased.
pub unsafe fn slice_out<'a, T>(ptr: *mut T, len: usize, name: &'static str) -> Result<&'a mut [T]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(CallError::NullWithLength { name, len });
    }
    // SAFETY: non-NULL, `len` writable elements by contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// A C yes/no flag: 0 or 1, anything else refused naming `name`
/// (CONVENTIONS: no `bool` across the boundary, every enum-like input
/// validated).
pub fn flag<T: Copy + PartialEq + From<u8> + Display>(
    value: T,
    name: &'static str,
) -> Result<bool> {
    if value == T::from(0) {
        Ok(false)
    } else if value == T::from(1) {
        Ok(true)
    } else {
        Err(Error::invalid_value(name.to_string(), value.to_string(), "0 or 1").into())
    }
}

/// Refuse `value` of the argument or field `name` unless it lies in
/// `low..=high`, saying what was got and what was expected.
pub fn in_range<T: PartialOrd + Display>(value: T, low: T, high: T, name: &str) -> Result<T> {
    if value < low || value > high {
        return Err(Error::invalid_value(
            name.to_string(),
            value.to_string(),
            format!("{low} to {high}"),
        )
        .into());
    }
    Ok(value)
}

/// Refuse a reserved field that is not 0.
pub fn reserved_zero(value: u8, name: &str) -> Result<()> {
    if value != 0 {
        return Err(Error::invalid_value(name.to_string(), value, "0").into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_accept_null_only_when_empty() {
        let bytes = [1u8, 2, 3];
        // SAFETY: a live array of 3 bytes, or NULL.
        unsafe {
            assert_eq!(slice_in(bytes.as_ptr(), 3, "bytes").unwrap(), &bytes);
            assert!(slice_in(std::ptr::null::<u8>(), 0, "bytes")
                .unwrap()
                .is_empty());
            let refused = slice_in(std::ptr::null::<u8>(), 4, "bytes").unwrap_err();
            assert_eq!(
                refused,
                CallError::NullWithLength {
                    name: "bytes",
                    len: 4
                }
            );
            assert!(refused
                .to_string()
                .starts_with("bytes is NULL but its length is 4"));
            assert!(slice_out(std::ptr::null_mut::<u8>(), 0, "buf")
                .unwrap()
                .is_empty());
            assert!(slice_out(std::ptr::null_mut::<u8>(), 1, "buf").is_err());
        }
    }

    #[test]
    fn ranges_and_flags_say_what_was_got_and_expected() {
        assert_eq!(in_range(5u8, 1, 16, "config->seat_count"), Ok(5));
        assert_eq!(
            in_range(0u8, 1, 16, "config->seat_count")
                .unwrap_err()
                .to_string(),
            "config->seat_count is 0; expected 1 to 16"
        );
        assert_eq!(flag(1, "clean"), Ok(true));
        assert_eq!(
            flag(2, "clean").unwrap_err().to_string(),
            "clean is 2; expected 0 or 1"
        );
        assert_eq!(
            reserved_zero(3, "config->reserved")
                .unwrap_err()
                .to_string(),
            "config->reserved is 3; expected 0"
        );
    }
}
