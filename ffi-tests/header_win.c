/* The header on Windows (mk/windows.mk, `make windows-check`): compiled and
 * linked against rungs.dll's import library with -Wall -Wextra -Werror, as
 * C99 with i686-w64-mingw32-gcc and as C++11 with x86_64-w64-mingw32-g++.
 * The i686 build also uses -mrtd, making stdcall the default convention (as
 * a game built with MSVC's /Gz): the calls still link to rungs' cdecl
 * exports, and a callback written with RUNGS_CALL still fits rungs' callback
 * types, because the header names the convention. Built with
 * -DRUNGS_EXPECT_MISMATCH, a callback written without RUNGS_CALL must fail
 * to compile under -mrtd: the header does not let a game pass rungs a
 * callback of the wrong convention silently. */
#include "rungs.h"

static void RUNGS_CALL on_send_frame(void *user, uint32_t frame, uint32_t tag) {
    (void)user;
    (void)frame;
    (void)tag;
}

#ifdef RUNGS_EXPECT_MISMATCH
static void on_send_frame_default_convention(void *user, uint32_t frame, uint32_t tag) {
    (void)user;
    (void)frame;
    (void)tag;
}
#endif

int main(void) {
    rungs_send_frame_fn send_frame = on_send_frame;
#ifdef RUNGS_EXPECT_MISMATCH
    send_frame = on_send_frame_default_convention;
#endif
    send_frame(NULL, 0, 0);
    return rungs_abi_version() == RUNGS_ABI_VERSION ? 0 : 1;
}
