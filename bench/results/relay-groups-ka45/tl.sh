#!/bin/bash
# inside netns+niced group: redis (own session), relay in the client's session or its own; perf sched events system-wide
set -u
ip link set lo up
OUT=/work/ka45-bins/exp/tl; mkdir -p $OUT
setsid redis-server --port 16379 --save "" --appendonly no >/dev/null & sleep 0.3
RS=$(pgrep -n redis-server); nice=$(awk '{print $NF}' /proc/self/autogroup); echo $nice > /proc/$RS/autogroup
T=$(mktemp -d)
printf 'global\n  maxconn 8192\n  nbthread 1\ndefaults\n  mode tcp\n  timeout connect 5s\n  timeout client 120s\n  timeout server 120s\nlisten redis\n  bind 127.0.0.1:16380\n  server s1 127.0.0.1:16379\n' > $T/h.cfg
haproxy -db -f $T/h.cfg >/dev/null 2>&1 & HP=$!
/work/ka45-bins/main -q relay tcp-listen:127.0.0.1:16381 tcp:127.0.0.1:16379 2>/dev/null & ZP=$!
setsid /work/ka45-bins/main -q relay tcp-listen:127.0.0.1:16382 tcp:127.0.0.1:16379 2>/dev/null & ZO=$!
sleep 0.3; echo $nice > /proc/$ZO/autogroup
for r in 1 2; do
for v in "hap-shared 16380 $HP" "zc-shared 16381 $ZP" "zc-own 16382 $ZO"; do
  set -- $v
  redis-benchmark -p $2 -q -n 300000 -c 50 -t get > $OUT/$1-$r.rb 2>&1 & B=$!
  sleep 0.8
  BP=$(pgrep -n redis-benchmark)
  perf record -q -a -o $OUT/$1-$r.perf -e sched:sched_switch -e sched:sched_wakeup -- sleep 0.5 2>/dev/null
  echo "$1 relay=$3 redis=$RS bench=$BP" > $OUT/$1-$r.pids
  wait $B
done; done
kill $HP $ZP $ZO $RS
