/* Checks scripts/windows-processprng.c under Wine (`make windows-prng`):
 * ProcessPrng, called directly and through its import pointer, fills bytes
 * that are neither zero nor the same twice. */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>

#include <stdio.h>
#include <string.h>

BOOL WINAPI process_prng(PBYTE data, SIZE_T len) __asm__("ProcessPrng");
extern BOOL(WINAPI *process_prng_pointer)(PBYTE, SIZE_T) __asm__("__imp_ProcessPrng");

int main(void) {
    unsigned char a[64], b[64], zero[64];
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    memset(zero, 0, sizeof zero);
    if (!process_prng(a, sizeof a) || !process_prng_pointer(b, sizeof b)) {
        puts("FAIL: ProcessPrng returned FALSE");
        return 1;
    }
    if (memcmp(a, zero, sizeof a) == 0 || memcmp(b, zero, sizeof b) == 0 || memcmp(a, b, sizeof a) == 0) {
        puts("FAIL: ProcessPrng's bytes are zero or repeat");
        return 1;
    }
    puts("ProcessPrng over bcrypt.dll: two calls of 64 bytes, nonzero and distinct");
    return 0;
}
