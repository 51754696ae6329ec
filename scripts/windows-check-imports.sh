#!/usr/bin/env bash
# Check that a Windows DLL or EXE imports only the DLLs listed in
# scripts/windows-allowed-imports.txt (shell patterns, case-insensitive):
# the ones Wine 8 provides and Windows 10 ships. Prints the imports on one
# line; exits 1 naming the first DLL not allowed.
#
#   scripts/windows-check-imports.sh FILE TOOL_PREFIX
set -euo pipefail

file=$1 tool=$2
allow="$(cd "$(dirname "$0")" && pwd)/windows-allowed-imports.txt"
imports=$("$tool-objdump" -p "$file" | sed -n 's/^[[:space:]]*DLL Name: //p' |
    tr '[:upper:]' '[:lower:]' | sort -u)
if [ -z "$imports" ]; then
    echo "FAIL $file: no imports read" >&2
    exit 1
fi
for dll in $imports; do
    allowed=no
    while read -r pattern; do
        case $pattern in '' | '#'*) continue ;; esac
        # shellcheck disable=SC2254 # the allow-list holds shell patterns
        case $dll in $pattern) allowed=yes && break ;; esac
    done <"$allow"
    if [ $allowed = no ]; then
        echo "FAIL $file imports $dll, which is not in scripts/windows-allowed-imports.txt (Wine 8 may lack it; see docs/windows.md)" >&2
        exit 1
    fi
done
echo $imports
