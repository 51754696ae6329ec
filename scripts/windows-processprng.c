/* ProcessPrng for rungs.dll, from bcrypt.dll instead of bcryptprimitives.dll.
 *
 * Rust's std on *-windows-gnu fills its random bytes (HashMap's RandomState,
 * nothing else rungs could reach) with ProcessPrng, imported from
 * bcryptprimitives.dll through a raw-dylib import object inside std. Wine 8
 * has no bcryptprimitives.dll and refuses to load a DLL that imports it.
 * scripts/windows-dll.sh links this object before librungs.a whenever a
 * first link still imports bcryptprimitives.dll (no LTO, e.g. the dev
 * profile): std's reference then resolves here, the linker never pulls std's
 * import object, and the bytes come from BCryptGenRandom (bcrypt.dll: Wine
 * 8, Windows Vista and later). docs/windows.md has the story. */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <bcrypt.h>

/* Same contract as ProcessPrng: fill `len` bytes, TRUE (it cannot fail on
 * Windows 10; here a failure of BCryptGenRandom returns FALSE, which std
 * turns into a panic rather than returning predictable bytes). Both names
 * std's import object defines are defined here, exactly as it spells them
 * (undecorated on i686 too, as raw-dylib imports are): the function, which
 * std may call directly, and the import pointer it may call through. */
BOOL WINAPI rungs_process_prng(PBYTE data, SIZE_T len) __asm__("ProcessPrng");
BOOL WINAPI rungs_process_prng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG chunk = len > 0x40000000u ? 0x40000000u : (ULONG)len;
        if (!BCRYPT_SUCCESS(BCryptGenRandom(NULL, data, chunk, BCRYPT_USE_SYSTEM_PREFERRED_RNG)))
            return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}

BOOL(WINAPI *rungs_imp_process_prng)(PBYTE, SIZE_T) __asm__("__imp_ProcessPrng") = rungs_process_prng;
