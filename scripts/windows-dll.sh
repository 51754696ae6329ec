#!/usr/bin/env bash
# Build rungs.dll for one Windows target, the way docs/windows.md explains:
# cargo builds the static library, MinGW gcc links the DLL from it.
#
#   scripts/windows-dll.sh TRIPLE PROFILE OUTDIR [FEATURE...]
#
# TRIPLE is i686-pc-windows-gnu or x86_64-pc-windows-gnu. OUTDIR receives
#   rungs.dll        stripped, exporting exactly the functions of include/rungs/*.h
#                    (plus, with the `testing` feature, the library's
#                    rungs_testing_* hooks)
#   rungs.def        the export list
#   librungs.dll.a   import library for MinGW (-lrungs)
#   rungs.lib        import library for MSVC (made by dlltool from rungs.def)
#   librungs.a       the static library without debug info, for a mod DLL
#   link-libs.txt    the system libraries a static link needs (from rustc)
set -euo pipefail

if [ $# -lt 3 ]; then
    echo "usage: $0 TRIPLE PROFILE OUTDIR [FEATURE...]" >&2
    exit 2
fi
triple=$1 profile=$2 out=$3
shift 3
case $triple in
    i686-pc-windows-gnu) tool=i686-w64-mingw32 ;;
    x86_64-pc-windows-gnu) tool=x86_64-w64-mingw32 ;;
    *) echo "$0: unknown Windows target $triple" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
target_dir=${CARGO_TARGET_DIR:-$root/target}
features=()
for feature in "$@"; do features+=(--features "$feature"); done
mkdir -p "$out"
profile_dir=$profile
if [ "$profile" = dev ]; then profile_dir=debug; fi

# Only the staticlib crate type: the DLL is linked below, not by rustc.
# rustc names the system libraries the static library needs
# (--print native-static-libs) only when it compiles; keep its answer.
log=$(cd "$root" && cargo rustc --quiet --lib --crate-type staticlib --profile "$profile" \
    --target "$triple" "${features[@]}" -- --print native-static-libs 2>&1) || {
    echo "$log" >&2
    exit 1
}
libs=$(sed -n 's/.*native-static-libs: //p' <<<"$log" | tail -1)
libs_cache="$target_dir/$triple/$profile_dir/native-static-libs.txt"
if [ -n "$libs" ]; then
    echo "$libs" >"$libs_cache"
elif [ -s "$libs_cache" ]; then
    libs=$(cat "$libs_cache")
else
    echo "$0: rustc did not print the native static libraries; touch src/lib.rs and retry" >&2
    exit 1
fi
echo "$libs" >"$out/link-libs.txt"
staticlib="$target_dir/$triple/$profile_dir/librungs.a"

# The export list: every function the header declares (build.rs writes
# "RUNGS_CALL name(" for each), plus the test hooks a `testing` build defines.
{
    echo "LIBRARY rungs.dll"
    echo "EXPORTS"
    cat "$root"/include/rungs/*.h | sed -n 's/.*RUNGS_CALL \(rungs_[A-Za-z0-9_]*\)(.*/    \1/p'
    "$tool-nm" -g --defined-only "$staticlib" 2>/dev/null |
        sed -n 's/^[0-9a-f]* T _\{0,1\}\(rungs_testing_[A-Za-z0-9_]*\)$/    \1/p' | sort -u
} >"$out/rungs.def"

# --gc-sections keeps only what the exports reach; -static-libgcc so the DLL
# needs no libgcc_s DLL; -s strips the symbols and debug info;
# --no-insert-timestamp leaves the PE header's link time at 0, so the same
# sources give the same DLL (and a repeatable release zip).
# ld loads the LLVM plugin of /usr/lib/bfd-plugins, if any, which reports
# every Rust member it cannot read as bitcode (on stdout): noise, so the log
# is shown whole only if the link fails, and otherwise only its warnings.
link_dll() {
    # shellcheck disable=SC2086 # $libs is a list of linker flags
    if ! "$tool-gcc" -shared -o "$out/rungs.dll" "$out/rungs.def" "$@" "$staticlib" \
        -Wl,--gc-sections -Wl,--no-insert-timestamp -static-libgcc -s \
        -Wl,--out-implib,"$out/librungs.dll.a" $libs >"$out/link.log" 2>&1; then
        grep -v '^bfd plugin: ' "$out/link.log" >&2
        exit 1
    fi
    grep -i 'warning' "$out/link.log" >&2 || true
}
link_dll
# If std's ProcessPrng (bcryptprimitives.dll, which Wine 8 lacks) is still
# imported, as without LTO, relink with scripts/windows-processprng.c first:
# it defines ProcessPrng over bcrypt.dll, so std's import object is never
# pulled in (docs/windows.md).
if grep -qi 'DLL Name: bcryptprimitives.dll' <<<"$("$tool-objdump" -p "$out/rungs.dll")"; then
    "$tool-gcc" -std=c99 -O2 -Wall -Wextra -Werror -c "$root/scripts/windows-processprng.c" \
        -o "$out/processprng.o"
    libs="$libs -lbcrypt"
    link_dll "$out/processprng.o"
    echo "$out/rungs.dll: std's ProcessPrng reference survived the link; resolved by scripts/windows-processprng.c (bcrypt.dll)"
fi
"$tool-dlltool" --input-def "$out/rungs.def" --dllname rungs.dll --output-lib "$out/rungs.lib"
# The static library without debug info. std's archive members include
# empty split-debuginfo (.dwo) files, which strip refuses: drop them first.
# (binutils' LLVM plugin reports every Rust member it cannot read as
# bitcode: noise, shown only if a step fails.)
cp "$staticlib" "$out/librungs.a"
if ! { "$tool-ar" t "$out/librungs.a" | { grep '\.dwo$' || true; } | xargs -r "$tool-ar" d "$out/librungs.a" &&
    "$tool-strip" --strip-debug "$out/librungs.a"; } >"$out/strip.log" 2>&1; then
    cat "$out/strip.log" >&2
    exit 1
fi
