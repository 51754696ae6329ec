#!/usr/bin/env bash
# Check what scripts/windows-dll.sh built in DIR for one Windows target:
#   - rungs.dll imports only the DLLs of scripts/windows-allowed-imports.txt;
#   - its exports are exactly the functions include/rungs/*.h declare (a
#     `testing` build, --testing, may add rungs_testing_* and nothing else);
#   - rungs.lib (MSVC) and librungs.dll.a (MinGW) import exactly those;
#   - a shipping build's librungs.a does not define the test hooks.
# Prints one summary line per file; exits 1 on the first mismatch.
#
#   scripts/windows-check-dll.sh DIR TOOL_PREFIX [--testing]
set -euo pipefail

dir=$1 tool=$2 testing=${3:-}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "FAIL $dir: $*" >&2
    exit 1
}

# Imports: every "DLL Name:" of the import tables against the allow-list.
"$root/scripts/windows-check-imports.sh" "$dir/rungs.dll" "$tool" >"$tmp/imports" || exit 1

# The header's functions: build.rs writes "RUNGS_CALL name(" for each.
cat "$root"/include/rungs/*.h | sed -n 's/.*RUNGS_CALL \(rungs_[A-Za-z0-9_]*\)(.*/\1/p' | sort -u >"$tmp/header"
[ -s "$tmp/header" ] || fail "no functions found in include/rungs/*.h"

# Exports: the names of the export table.
"$tool-objdump" -p "$dir/rungs.dll" |
    sed -n '/^\[Ordinal\/Name Pointer\] Table/,/^$/s/^[[:space:]]*\[[[:space:]]*[0-9]*\] //p' |
    sort -u >"$tmp/exports"
if [ "$testing" = --testing ]; then
    grep -v '^rungs_testing_' "$tmp/exports" >"$tmp/exports.checked" || true
else
    cp "$tmp/exports" "$tmp/exports.checked"
fi
if ! diff -u "$tmp/header" "$tmp/exports.checked" >"$tmp/diff"; then
    cat "$tmp/diff" >&2
    fail "rungs.dll's exports differ from include/rungs/*.h's functions (- header only, + DLL only)"
fi

# Import libraries: one __imp_ symbol per export (i686 adds a leading _).
for lib in rungs.lib librungs.dll.a; do
    "$tool-nm" "$dir/$lib" 2>/dev/null | sed -n 's/.* I __imp__\{0,1\}\(rungs_[A-Za-z0-9_]*\)$/\1/p' |
        sort -u >"$tmp/lib"
    diff -q "$tmp/exports" "$tmp/lib" >/dev/null ||
        fail "$lib does not import exactly rungs.dll's exports"
done

if [ "$testing" != --testing ] && [ -f "$dir/librungs.a" ]; then
    if grep -q ' T _\{0,1\}rungs_testing_' <<<"$("$tool-nm" -g --defined-only "$dir/librungs.a" 2>/dev/null)"; then
        fail "librungs.a defines a rungs_testing_ hook; what ships is built without the testing feature"
    fi
fi

printf '%s: rungs.dll %s bytes, %s exports = include/rungs/*.h%s; imports %s\n' \
    "$dir" "$(stat -c %s "$dir/rungs.dll")" "$(wc -l <"$tmp/exports.checked")" \
    "$([ "$testing" = --testing ] && echo " + $(grep -c '^rungs_testing_' "$tmp/exports") test hook(s)")" \
    "$(cat "$tmp/imports")"
printf '%s: rungs.lib and librungs.dll.a import the same %s functions\n' "$dir" "$(wc -l <"$tmp/exports")"
