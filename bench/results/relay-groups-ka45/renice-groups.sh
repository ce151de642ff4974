#!/bin/bash
# every process in this netns whose autogroup is not at $1 gets it (new sessions start at nice 0)
N=${1:--19}; me=$(readlink /proc/self/ns/net)
while :; do
  for d in /proc/[0-9]*; do
    [[ $(readlink $d/ns/net 2>/dev/null) == "$me" ]] || continue
    g=$(cat $d/autogroup 2>/dev/null) || continue
    [[ $g == *"nice $N" ]] || echo $N > $d/autogroup 2>/dev/null
  done
  sleep 0.05
done
