#!/bin/bash
# inside a netns, in a niced autogroup: relaycost.sh alternately with zerocat in the script's group and in one of its own
ip link set lo up
./renice-groups.sh -19 & W=$!
for i in $(seq 1 ${RUNS:-2}); do
  for v in $VARIANTS; do
    case $v in shared) Z=${ZC_BIN:-/work/ka45-bins/main};; own) Z=$PWD/own-group-zerocat;; esac
    ZEROCAT=$Z bash /work/shared/bench/relaycost.sh -n ${N:-5} -o rc-out/$v-$i.txt > /dev/null 2>&1
    echo "$v $i $(date +%T) load $(cut -d' ' -f1 /proc/loadavg): $(grep -E 'ratio redis' rc-out/$v-$i.txt | awk '{print $2, $4}' | tr '\n' ' ')"
  done
done
kill $W
