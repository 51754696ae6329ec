/* The library-wide C API: versions, result names, error details, the panic
 * guard. */
#include <stdlib.h>

#include "harness.h"
#include "rungs.h"

static void test_versions(void) {
    CHECK_EQ(rungs_abi_version(), RUNGS_ABI_VERSION);
    CHECK(rungs_version() != NULL);
    CHECK(strlen(rungs_version()) >= 5);
}

static void test_result_names(void) {
    CHECK_STR(rungs_result_str(RUNGS_OK), "RUNGS_OK");
    CHECK_STR(rungs_result_str(RUNGS_ERR_NULL_POINTER), "RUNGS_ERR_NULL_POINTER");
    CHECK_STR(rungs_result_str(RUNGS_ERR_INVALID_ARGUMENT), "RUNGS_ERR_INVALID_ARGUMENT");
    CHECK_STR(rungs_result_str(RUNGS_ERR_PANIC), "RUNGS_ERR_PANIC");
    CHECK_STR(rungs_result_str(RUNGS_ERR_POISONED), "RUNGS_ERR_POISONED");
    CHECK_STR(rungs_result_str(RUNGS_ERR_REENTRANT), "RUNGS_ERR_REENTRANT");
    CHECK_STR(rungs_result_str(RUNGS_ERR_UNKNOWN_SEAT), "RUNGS_ERR_UNKNOWN_SEAT");
    CHECK_STR(rungs_result_str(RUNGS_ERR_IO), "RUNGS_ERR_IO");
    CHECK_STR(rungs_result_str(-1), "RUNGS_ERR_UNKNOWN_CODE");
    CHECK_STR(rungs_result_str(100000), "RUNGS_ERR_UNKNOWN_CODE");
}

static void test_last_error_copy(void) {
    size_t len = 0;
    char small[4];
    /* Length query with no buffer. */
    CHECK_EQ(rungs_last_error_message(NULL, 0, &len), RUNGS_OK);
    /* A NULL buffer with a capacity is a misuse. */
    CHECK_EQ(rungs_last_error_message(NULL, 8, NULL), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_last_error_message(NULL, 0, &len), RUNGS_OK);
    CHECK(len > 0);
    /* Truncation keeps the terminator inside the buffer. */
    memset(small, 'x', sizeof small);
    CHECK_EQ(rungs_last_error_message(small, sizeof small, &len), RUNGS_OK);
    CHECK_EQ(small[3], '\0');
    CHECK_EQ(strlen(small), 3);
}

int main(void) {
    test_versions();
    test_result_names();
    test_last_error_copy();
    return harness_report("core");
}
