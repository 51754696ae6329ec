# Release archives (scripts/dist-*.sh, docs/dist/). Included by the top
# Makefile; not part of `make test`.
#
#   make dist        target/dist/rungs-VERSION-windows.zip (the i686 and x86_64
#                    DLLs, import libraries, static libraries, headers, README
#                    for mod authors) and rungs-VERSION-linux-ARCH.tar.gz (what
#                    `make install` installs, relocatable), each with its
#                    SHA256SUMS, and target/dist/SHA256SUMS for the archives
#   make dist-check  each archive unpacked alone into an empty folder builds and
#                    runs examples/ladder.c: under Wine (32-bit for i686) and
#                    on Linux through pkg-config and CMake

DIST_OUT := $(TARGET_DIR)/dist

.PHONY: dist dist-windows dist-linux dist-check

dist: dist-windows dist-linux
	@cd $(DIST_OUT) && ls -l *.zip *.tar.gz && cat SHA256SUMS

dist-windows: windows
	@./scripts/dist-windows.sh $(WINDOWS_OUT) $(DIST_OUT) $(VERSION)

dist-linux: lib
	@./scripts/dist-linux.sh $(RELEASE) $(DIST_OUT) $(VERSION)

dist-check: dist
	./scripts/dist-check.sh $(DIST_OUT) $(VERSION)
