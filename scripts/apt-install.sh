#!/usr/bin/env bash
# Install Debian packages with apt-get, quietly and without prompts, as root
# or through sudo. Nothing to do without arguments. Used by setup.sh and
# setup-windows.sh, which decide what is missing.
#
#   scripts/apt-install.sh [--no-install-recommends] PACKAGE...
set -euo pipefail

options=()
if [ "${1:-}" = --no-install-recommends ]; then
    options+=("$1")
    shift
fi
[ $# -gt 0 ] || exit 0
echo "setup: installing $*"
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${options[@]}" "$@" >/dev/null
