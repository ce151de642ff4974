#!/bin/bash
# inside a netns: per relay, perf record syscalls + sched_switch under keep-alive load; strace sample
set -u
ip link set lo up
OUT=${OUT:-/work/ka45-bins/exp/seq}; mkdir -p $OUT
T=$(mktemp -d)
redis-server --port 16379 --save "" --appendonly no >/dev/null & RS=$!
cat > $T/h.cfg <<C
global
  maxconn 8192
  nbthread 1
defaults
  mode tcp
  timeout connect 5s
  timeout client 120s
  timeout server 120s
listen redis
  bind 127.0.0.1:16380
  server s1 127.0.0.1:16379
C
haproxy -db -f $T/h.cfg >/dev/null 2>&1 & HP=$!
declare -A PORT PID
PORT[haproxy]=16380; PID[haproxy]=$HP
p=16381
for spec in "$@"; do name=${spec%%=*}; args=${spec#*=}; IFS=, read -ra a <<<"$args"
  "${a[0]}" -q relay "${a[@]:1}" tcp-listen:127.0.0.1:$p tcp:127.0.0.1:16379 2>/dev/null & PID[$name]=$!; PORT[$name]=$p; p=$((p+1)); done
sleep 0.5
for name in "${!PORT[@]}"; do
  redis-benchmark -p ${PORT[$name]} -q -n 400000 -c 50 -t get > $OUT/$name.rb 2>&1 & B=$!
  sleep 1
  perf record -q -o $OUT/$name.perf -e 'raw_syscalls:sys_enter' -e 'raw_syscalls:sys_exit' -e 'sched:sched_switch' -e 'sched:sched_wakeup' -p ${PID[$name]} -- sleep 1 2>/dev/null
  strace -f -tt -p ${PID[$name]} -o $OUT/$name.strace -- 2>/dev/null & S=$!; sleep 0.3; kill $S; wait $S 2>/dev/null
  wait $B
done
kill ${PID[@]} $RS 2>/dev/null; wait 2>/dev/null
