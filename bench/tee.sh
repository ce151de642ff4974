#!/usr/bin/env bash
# zerocat tee vs GNU tee vs mbuffer: 1 GiB fanned out to 2 pipes, and to a file + a pipe
# on tmpfs and on ext4. Each reader is `zerocat -q pipe - /dev/null` (splice into
# /dev/null: the same near-free reader for every tool). Runs interleave the tools; the
# figure is the median wall time of RUNS runs (default 5), page cache warm.
# Usage: bench/tee.sh [ZEROCAT] [TMPFS_DIR] [EXT4_DIR]
set -euo pipefail
Z=${1:-target/release/zerocat}
SHM=${2:-/dev/shm/zerocat-bench}
EXT=${3:-/tmp/zerocat-bench}
RUNS=${RUNS:-5}
SIZE_MIB=${SIZE_MIB:-1024}
mkdir -p "$SHM" "$EXT"
trap 'rm -rf "$SHM" "$EXT"' EXIT
head -c $((SIZE_MIB << 20)) /dev/urandom >"$SHM/in"
cp "$SHM/in" "$EXT/in"
R="$Z -q pipe - /dev/null"

# time_one CMD OUT: wall seconds of `bash -c CMD` (a FIFO reader, if any, is inside CMD).
# The previous output is removed and everything synced first, outside the timing: else a
# run pays for the writeback of the run before it (seen on ext4: it flipped the ranking).
time_one() {
    local t0 t1
    rm -f "$2"
    sync
    t0=$(date +%s.%N)
    bash -c "$1"
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A CMDS
scenario() { # NAME DIR
    local name=$1 dir=$2 fifo=$2/fifo out=$2/out
    rm -f "$fifo"; mkfifo "$fifo"
    if [ "$name" = "2 pipes" ]; then
        CMDS[zerocat]="$R <$fifo & $Z -q tee $dir/in - $fifo | $R; wait"
        CMDS[gnu-tee]="$R <$fifo & tee $fifo <$dir/in | $R; wait"
        CMDS[mbuffer]="$R <$fifo & mbuffer -q -i $dir/in -o $fifo -o - 2>/dev/null | $R; wait"
    else
        CMDS[zerocat]="$Z -q tee $dir/in $out - | $R"
        CMDS[gnu-tee]="tee $out <$dir/in | $R"
        CMDS[mbuffer]="mbuffer -q -i $dir/in -o $out -o - 2>/dev/null | $R"
    fi
    declare -A times
    for ((i = 0; i < RUNS; i++)); do
        for tool in zerocat gnu-tee mbuffer; do
            times[$tool]+="$(time_one "${CMDS[$tool]}" "$out") "
        done
    done
    local zc
    zc=$(echo ${times[zerocat]} | tr ' ' '\n' | median)
    for tool in zerocat gnu-tee mbuffer; do
        local m
        m=$(echo ${times[$tool]} | tr ' ' '\n' | median)
        printf '%-22s %-8s median %6.3f s  %6.0f MiB/s  zerocat x%.2f   runs: %s\n' \
            "$name" "$tool" "$m" "$(echo "$SIZE_MIB / $m" | bc -l)" \
            "$(echo "$m / $zc" | bc -l)" "${times[$tool]}"
    done
}
ONLY=${ONLY:-}  # a word of the scenario names to run only those: pipes, tmpfs, ext4
[[ -z $ONLY || $ONLY == pipes ]] && scenario "2 pipes" "$SHM"
[[ -z $ONLY || $ONLY == tmpfs ]] && scenario "file+pipe tmpfs" "$SHM"
[[ -z $ONLY || $ONLY == ext4 ]] && scenario "file+pipe ext4" "$EXT"
true
