# Shared by scripts/dist-windows.sh and scripts/dist-linux.sh (sourced): the
# files every release archive holds, its checksums, and timestamps that make
# the same commit give the same archive bytes.

# The commit's time: every file of an archive gets it (SOURCE_DATE_EPOCH
# when set, as reproducible-builds tools expect).
dist_epoch() {
    echo "${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}"
}

# stage_common STAGE README: what every archive holds beside its libraries:
# the README for its platform, the licences, the changelog, the headers and
# the example (examples-c/ladder.c, so the archive builds it alone).
stage_common() {
    local stage=$1 readme=$2
    rm -rf "$stage"
    mkdir -p "$stage/include/rungs" "$stage/examples"
    cp "$readme" "$stage/README.md"
    cp "$root/LICENSE-MIT" "$root/LICENSE-APACHE" "$root/CHANGELOG.md" "$stage/"
    cp "$root/include/rungs.h" "$stage/include/"
    cp "$root"/include/rungs/*.h "$stage/include/rungs/"
    if [ -f "$root/include/rungs.hpp" ]; then cp "$root/include/rungs.hpp" "$stage/include/"; fi
    cp "$root/examples-c/ladder.c" "$stage/examples/ladder.c"
}

# finish_stage STAGE: SHA256SUMS of every regular file (links are checked
# through the file they name), then every file's time set to the commit's.
finish_stage() {
    local stage=$1
    (cd "$stage" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort |
        xargs sha256sum >SHA256SUMS)
    find "$stage" -exec touch -h -d "@$(dist_epoch)" {} +
}

# sum_archives DIR: DIR/SHA256SUMS for the archives themselves.
sum_archives() {
    (cd "$1" && find . -maxdepth 1 -type f \( -name '*.zip' -o -name '*.tar.gz' \) |
        sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
}
