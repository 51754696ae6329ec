/* The version a program compiled against (the header's RUNGS_VERSION_*
 * macros, written by build.rs from Cargo.toml's version) and the version of
 * the library it loaded (rungs_version()) are the same release, and on Linux
 * the loaded library is known by the SONAME its ABI version names. */
#include <stdlib.h>

#include "harness.h"
#include "rungs.h"

#if defined(__linux__)
#include <dlfcn.h>
#endif

/* The macros are usable in #if: what a program testing for a feature of a
 * release writes. */
#if !defined(RUNGS_VERSION_NUMBER) || RUNGS_VERSION_NUMBER < 300
#error "rungs.h defines RUNGS_VERSION_NUMBER, 300 (0.3.0) or later"
#endif

/* "MAJOR.MINOR.PATCH" (a pre-release suffix after PATCH allowed) into three
 * numbers; 0 if the text is not of that form. */
static int parse_version(const char *text, long parts[3]) {
    int i;
    for (i = 0; i < 3; i++) {
        char *end;
        if (*text < '0' || *text > '9') return 0;
        parts[i] = strtol(text, &end, 10);
        if (i < 2 && *end != '.') return 0;
        text = end + (i < 2);
    }
    return 1;
}

static void test_header_and_library_agree(void) {
    long parts[3] = {-1, -1, -1};
    CHECK_STR(rungs_version(), RUNGS_VERSION_STRING);
    CHECK(parse_version(rungs_version(), parts));
    CHECK_EQ(parts[0], RUNGS_VERSION_MAJOR);
    CHECK_EQ(parts[1], RUNGS_VERSION_MINOR);
    CHECK_EQ(parts[2], RUNGS_VERSION_PATCH);
    CHECK_EQ(RUNGS_VERSION_NUMBER,
             RUNGS_VERSION_MAJOR * 10000L + RUNGS_VERSION_MINOR * 100L + RUNGS_VERSION_PATCH);
    CHECK_EQ(rungs_abi_version(), RUNGS_ABI_VERSION);
}

#if defined(__linux__)
/* The dynamic loader knows a loaded library by its SONAME: librungs.so.N,
 * N the ABI version (decision 100 in docs/decisions.md). */
static void test_soname_is_the_abi_version(void) {
    char soname[32];
    void *handle;
    snprintf(soname, sizeof soname, "librungs.so.%u", (unsigned)RUNGS_ABI_VERSION);
    handle = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == NULL) fprintf(stderr, "FAIL: no loaded library is known as %s\n", soname);
    CHECK(handle != NULL);
    if (handle != NULL) dlclose(handle);
}
#endif

int main(void) {
    test_header_and_library_agree();
#if defined(__linux__)
    /* Windows has no SONAME: the DLL is rungs.dll whatever its version. */
    test_soname_is_the_abi_version();
#endif
    return harness_report("version");
}
