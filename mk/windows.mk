# Windows and 32-bit targets (docs/windows.md). Included by the top Makefile;
# `make test` runs windows-test.
#
#   make windows        rungs.dll for i686 and x86_64 (MinGW), with rungs.def,
#                       librungs.dll.a, rungs.lib (MSVC) and librungs.a, stripped,
#                       in target/windows/{i686,x86_64}/ (installs what it needs)
#   make windows-check  imports against scripts/windows-allowed-imports.txt,
#                       exports against include/rungs.h, the header with both
#                       MinGW compilers, struct layouts C vs Rust per target
#   make windows-wine   the C harness, the vector replay and the C examples
#                       under wine64 against the x86_64 DLL
#   make windows-wine32 the C harness and both vector replays under 32-bit
#                       Wine against the i686 DLL (the one a TS-era game loads)
#   make harness32      the C harness as a 32-bit Linux program (gcc -m32)
#   make tsmod          the Tiberian Sun-shaped model as a 32-bit Windows game
#                       loading its mod DLL (linked through rungs.lib) and the
#                       i686 rungs.dll, under 32-bit Wine (examples-c/tsmodel)
#   make windows-prng   the ProcessPrng fallback (scripts/windows-processprng.c)
#                       on a dev-profile DLL, which keeps std's reference
#   make windows-test   all of the above, and what ships lacks the test hook

WINDOWS_OUT := $(TARGET_DIR)/windows
WIN_HEADER_TEST := $(ROOT)/ffi-tests/header_win.c
WIN_WARN := -Wall -Wextra -Werror -pedantic
LAYOUT_TARGETS := i686-pc-windows-gnu x86_64-pc-windows-gnu i686-unknown-linux-gnu

.PHONY: windows-setup windows windows-check windows-header windows-layout windows-wine \
    windows-wine32 windows-prng harness32 tsmod ship-check windows-test

windows-setup:
	@./scripts/setup-windows.sh

windows: windows-setup
	./scripts/windows-dll.sh i686-pc-windows-gnu dist $(WINDOWS_OUT)/i686
	./scripts/windows-dll.sh x86_64-pc-windows-gnu dist $(WINDOWS_OUT)/x86_64
	@cd $(WINDOWS_OUT) && ls -l i686/rungs.dll x86_64/rungs.dll i686/librungs.a x86_64/librungs.a

windows-check: windows windows-header windows-layout
	./scripts/windows-check-dll.sh $(WINDOWS_OUT)/i686 i686-w64-mingw32
	./scripts/windows-check-dll.sh $(WINDOWS_OUT)/x86_64 x86_64-w64-mingw32

# The header with both MinGW compilers, linked against the import libraries:
# C99 on i686 with -mrtd (stdcall as the default convention, like MSVC /Gz),
# C++11 on x86_64. And a callback without RUNGS_CALL must not compile under -mrtd.
windows-header: windows
	@mkdir -p $(WINDOWS_OUT)/header
	i686-w64-mingw32-gcc -std=c99 $(WIN_WARN) -mrtd -I$(ROOT)/include $(WIN_HEADER_TEST) \
	    -o $(WINDOWS_OUT)/header/header_i686.exe $(WINDOWS_OUT)/i686/librungs.dll.a
	x86_64-w64-mingw32-g++ -std=c++11 $(WIN_WARN) -I$(ROOT)/include -x c++ $(WIN_HEADER_TEST) -x none \
	    -o $(WINDOWS_OUT)/header/header_x86_64.exe $(WINDOWS_OUT)/x86_64/librungs.dll.a
	@if i686-w64-mingw32-gcc -std=c99 $(WIN_WARN) -mrtd -DRUNGS_EXPECT_MISMATCH -I$(ROOT)/include \
	    -c $(WIN_HEADER_TEST) -o $(WINDOWS_OUT)/header/mismatch.o 2>/dev/null; then \
	    echo "FAIL: a callback of the wrong calling convention compiled against rungs.h"; exit 1; fi
	@echo "header: C99 (i686, -mrtd) and C++11 (x86_64) build and link; a non-cdecl callback is refused"

# Every struct of include/rungs/*.h: size, alignment and field offsets from the
# target's C compiler against Rust's, at compile time (tools/layout-check).
# Then once with one deliberately wrong expectation, which must fail.
windows-layout: windows-setup
	@for t in $(LAYOUT_TARGETS); do \
	    RUNGS_LAYOUT_REPORT=$(WINDOWS_OUT)/layout-$$t.txt \
	        cargo check --quiet -p rungs-layout-check --target $$t || exit 1; \
	    cat $(WINDOWS_OUT)/layout-$$t.txt; \
	done
	@if RUNGS_LAYOUT_SELFTEST=1 cargo check --quiet -p rungs-layout-check --target i686-pc-windows-gnu \
	    >$(WINDOWS_OUT)/layout-selftest.log 2>&1; then \
	    echo "FAIL: the layout check accepted a wrong size"; exit 1; fi
	@grep -m1 "differs from C's" $(WINDOWS_OUT)/layout-selftest.log | sed 's/^/layout self-test (must fail): /'
	@RUNGS_LAYOUT_SELFTEST=0 cargo check --quiet -p rungs-layout-check --target i686-pc-windows-gnu

windows-wine: windows-setup
	$(MAKE) -C ffi-tests wine
	$(MAKE) -C examples-c wine

windows-wine32: windows-setup
	$(MAKE) -C ffi-tests wine32

# Without LTO (the dev profile), std's reference to ProcessPrng survives the
# link: scripts/windows-dll.sh must resolve it with windows-processprng.c,
# leaving no bcryptprimitives.dll import; the DLL must load under Wine and
# the replacement must return random bytes.
PRNG_OUT := $(WINDOWS_OUT)/x86_64-dev
windows-prng: windows-setup
	./scripts/windows-dll.sh x86_64-pc-windows-gnu dev $(PRNG_OUT) >$(PRNG_OUT).log; status=$$?; cat $(PRNG_OUT).log; exit $$status
	@grep -q 'resolved by scripts/windows-processprng.c' $(PRNG_OUT).log || \
	    { echo "FAIL: the dev-profile DLL no longer needs the ProcessPrng fallback; update docs/windows.md"; exit 1; }
	./scripts/windows-check-imports.sh $(PRNG_OUT)/rungs.dll x86_64-w64-mingw32
	x86_64-w64-mingw32-gcc -std=c99 $(WIN_WARN) -I$(ROOT)/include $(WIN_HEADER_TEST) \
	    -o $(PRNG_OUT)/header_x86_64.exe $(PRNG_OUT)/librungs.dll.a
	./scripts/wine-run.sh $(PRNG_OUT)/header_x86_64.exe && echo "the dev-profile rungs.dll loads under Wine"
	x86_64-w64-mingw32-gcc -std=c99 $(WIN_WARN) $(ROOT)/scripts/windows-processprng-test.c \
	    $(PRNG_OUT)/processprng.o -o $(PRNG_OUT)/processprng-test.exe -lbcrypt
	./scripts/wine-run.sh $(PRNG_OUT)/processprng-test.exe

harness32: windows-setup
	$(MAKE) -C ffi-tests check32

tsmod: windows-setup
	$(MAKE) -C examples-c/tsmodel wine32

# What ships carries no test hook: the release .so/.a and the Windows DLLs.
ship-check: lib windows
	@for f in $(RELEASE)/librungs.so $(RELEASE)/librungs.a; do \
	    if nm -g --defined-only $$f 2>/dev/null | grep -q ' T rungs_testing_'; then \
	        echo "FAIL: $$f exports a rungs_testing_ hook"; exit 1; fi; done
	@if grep -rq 'rungs_testing_' $(ROOT)/include; then \
	    echo "FAIL: a header of include/ declares a rungs_testing_ hook"; exit 1; fi
	@echo "ship-check: no rungs_testing_ hook in librungs.so, librungs.a, rungs.dll or include/"

windows-test: windows-check windows-wine windows-wine32 windows-prng harness32 tsmod ship-check
