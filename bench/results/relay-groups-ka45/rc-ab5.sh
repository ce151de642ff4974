#!/bin/bash
# quiet machine: relaycost.sh as the lead runs it (no nice, no watcher), zerocat plain vs in a session of its own
ip link set lo up
for i in $(seq 1 ${RUNS:-2}); do
  for v in shared own; do
    case $v in shared) Z=/work/ka45-bins/main;; own) Z=$PWD/own-group-zerocat;; esac
    ZEROCAT=$Z bash /work/shared/bench/relaycost.sh -n 7 -o rc-out5/$v-$i.txt > /dev/null 2>&1
    echo "$v $i $(date +%T) load $(cut -d' ' -f1 /proc/loadavg): $(grep -E 'ratio redis' rc-out5/$v-$i.txt | awk '{print $2, $4}' | tr '\n' ' ')"
  done
done
