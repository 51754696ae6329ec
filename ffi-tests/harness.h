/* Minimal test harness for the rungs C API tests.
 *
 * Each test_*.c is a standalone program: it includes this header, calls
 * CHECK* macros, and ends main() with `return harness_report("name");`,
 * which prints "name: N passed, M failed" as its last line. The Makefile runs
 * every test program and adds the counts up. */
#ifndef RUNGS_FFI_HARNESS_H
#define RUNGS_FFI_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rungs.h"

/* The library's test hook, exported only by a build with the `testing` cargo
 * feature (what this Makefile links), so include/rungs.h does not declare it.
 * Makes the next object call on this thread panic inside rungs. */
RUNGS_API void RUNGS_CALL rungs_testing_panic_next_call(void);

/* A basic report (no sections) with these fields, struct_size set. */
static rungs_report basic_report(uint32_t process_us, uint32_t max_wait_ms, uint32_t worst_rtt_ms,
                                 uint8_t has_worst_rtt) {
    rungs_report r;
    rungs_report_init(&r);
    r.process_us = process_us;
    r.max_wait_ms = max_wait_ms;
    r.worst_rtt_ms = worst_rtt_ms;
    r.has_worst_rtt = has_worst_rtt;
    return r;
}

static int harness_passed;
static int harness_failed;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (cond) {                                                                    \
            harness_passed++;                                                          \
        } else {                                                                       \
            harness_failed++;                                                          \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);            \
        }                                                                              \
    } while (0)

/* Compare two integers, printing both on failure. */
#define CHECK_EQ(actual, expected)                                                     \
    do {                                                                               \
        long long harness_a = (long long)(actual);                                     \
        long long harness_e = (long long)(expected);                                   \
        if (harness_a == harness_e) {                                                  \
            harness_passed++;                                                          \
        } else {                                                                       \
            harness_failed++;                                                          \
            fprintf(stderr, "FAIL %s:%d: %s == %lld, expected %s == %lld\n", __FILE__, \
                    __LINE__, #actual, harness_a, #expected, harness_e);               \
        }                                                                              \
    } while (0)

/* Compare two NUL-terminated strings. */
#define CHECK_STR(actual, expected)                                                    \
    do {                                                                               \
        const char *harness_a = (actual);                                              \
        const char *harness_e = (expected);                                            \
        if (harness_a && harness_e && strcmp(harness_a, harness_e) == 0) {             \
            harness_passed++;                                                          \
        } else {                                                                       \
            harness_failed++;                                                          \
            fprintf(stderr, "FAIL %s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__,   \
                    __LINE__, #actual, harness_a ? harness_a : "(null)",               \
                    harness_e ? harness_e : "(null)");                                 \
        }                                                                              \
    } while (0)

/* The calling thread's latest rungs error message must equal `expected`
 * (the test includes rungs.h). */
#define CHECK_MESSAGE(expected)                                                        \
    do {                                                                               \
        char harness_m[512];                                                           \
        harness_m[0] = '\0';                                                           \
        rungs_last_error_message(harness_m, sizeof harness_m, NULL);                   \
        CHECK_STR(harness_m, (expected));                                              \
    } while (0)

/* The calling thread's latest rungs error message must contain `needle`. */
#define CHECK_MESSAGE_HAS(needle)                                                      \
    do {                                                                               \
        char harness_m[512];                                                           \
        const char *harness_n = (needle);                                              \
        harness_m[0] = '\0';                                                           \
        rungs_last_error_message(harness_m, sizeof harness_m, NULL);                   \
        if (strstr(harness_m, harness_n) != NULL) {                                    \
            harness_passed++;                                                          \
        } else {                                                                       \
            harness_failed++;                                                          \
            fprintf(stderr, "FAIL %s:%d: message \"%s\" does not contain \"%s\"\n",    \
                    __FILE__, __LINE__, harness_m, harness_n);                         \
        }                                                                              \
    } while (0)

/* The calling thread's latest rungs error message must start with `prefix`. */
#define CHECK_MESSAGE_STARTS(prefix)                                                   \
    do {                                                                               \
        char harness_m[512];                                                           \
        const char *harness_p = (prefix);                                              \
        harness_m[0] = '\0';                                                           \
        rungs_last_error_message(harness_m, sizeof harness_m, NULL);                   \
        if (strncmp(harness_m, harness_p, strlen(harness_p)) == 0) {                   \
            harness_passed++;                                                          \
        } else {                                                                       \
            harness_failed++;                                                          \
            fprintf(stderr, "FAIL %s:%d: message \"%s\" does not start with \"%s\"\n",  \
                    __FILE__, __LINE__, harness_m, harness_p);                         \
        }                                                                              \
    } while (0)

#if defined(_WIN32)
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
/* The same two on Windows (the harness runs under Wine too): the
 * performance counter and Sleep, so nothing needs MinGW's winpthread. */
static uint64_t now_us(void) {
    LARGE_INTEGER freq, now;
    QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&now);
    return (uint64_t)(now.QuadPart / freq.QuadPart) * 1000000u +
           (uint64_t)(now.QuadPart % freq.QuadPart) * 1000000u / (uint64_t)freq.QuadPart;
}

static void sleep_ms(long ms) { Sleep((DWORD)ms); }
#elif defined(_POSIX_C_SOURCE) && _POSIX_C_SOURCE >= 199309L
#include <time.h>
/* Monotonic microseconds and a sleep, for tests over real sockets (the test
 * defines _POSIX_C_SOURCE before its first include). */
static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void sleep_ms(long ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}
#endif

/* Checks that cannot hold under Wine, where Wine differs from Windows in a
 * way the test can see (ntdll.dll's wine_get_version gives Wine away). They
 * are reported as NOT RUN, loudly, never counted as passed:
 *     if (NOT_UNDER_WINE("why")) { CHECK...; }                              */
static int harness_not_run;
#if defined(_WIN32)
static int harness_under_wine(void) {
    HMODULE ntdll = GetModuleHandleA("ntdll.dll");
    return ntdll != NULL && GetProcAddress(ntdll, "wine_get_version") != NULL;
}
#else
static int harness_under_wine(void) { return 0; }
#endif

static int harness_not_under_wine(const char *file, int line, const char *why) {
    if (!harness_under_wine()) return 1;
    harness_not_run++;
    printf("NOT RUN under Wine: %s:%d: %s\n", file, line, why);
    return 0;
}
#define NOT_UNDER_WINE(why) harness_not_under_wine(__FILE__, __LINE__, why)

static int harness_report(const char *name) {
    if (harness_not_run)
        printf("%s: %d group(s) of checks NOT RUN under Wine (see above)\n", name, harness_not_run);
    printf("%s: %d passed, %d failed\n", name, harness_passed, harness_failed);
    return harness_failed ? 1 : 0;
}

#endif
