#!/usr/bin/env bash
# bench/connwire.sh - what one short connection costs each relay, on the wire and in calls
# (issue 45's one-connection-per-request row): redis-benchmark -k 0 -c 20 -t ping_inline through
# HAProxy (tcp mode, nbthread 1), bench/minrelay.c and zerocat relay(s), one redis-server each,
# relays in turn, ROUNDS rounds. Per connection: the TCP counters' deltas (nstat: segments,
# pure ACKs, resets, delayed ACKs...; system-wide, so other traffic on the machine adds noise),
# on which end each TIME_WAIT was left (ss), and the relay's syscalls, epoll returns and context
# switches (perf stat on the syscall tracepoints; tracing slows the relay, so the rates printed
# mean little, the counts a connection are what to read).
#
# usage: bench/connwire.sh [NAME=ZEROCAT_BINARY...]   (default: main=target/release/zerocat)
# env: N (connections a run, 20000), ROUNDS (1), PERF=0 to skip perf stat.
# Loopback only; needs redis-server, redis-benchmark, haproxy, nstat, ss, cc (perf optional).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
N=${N:-20000}; ROUNDS=${ROUNDS:-1}; PERF=${PERF:-1}
tmp=$(mktemp -d); pids=(); ports=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${ports[@]}"; do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1; done
  rm -rf "$tmp"
}
trap cleanup EXIT
for t in redis-server redis-benchmark haproxy nstat ss cc; do
  command -v $t >/dev/null || { echo "SKIPPED: $t not installed"; exit 0; }
done
cc -O2 -o "$tmp/minrelay" "$HERE/minrelay.c" || exit 1
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
relays=(haproxy minrelay)
(($#)) || set -- "main=$HERE/../target/release/zerocat"
relays+=("$@")
for r in "$@"; do
  [[ -x ${r#*=} ]] || { echo "connwire: ${r#*=} is not an executable zerocat (build it: cargo build --release)"; exit 2; }
done
declare -A PID PORT RPORT
for r in "${relays[@]}"; do
  name=${r%%=*}; RPORT[$name]=$(free_port); PORT[$name]=$(free_port); ports+=("${RPORT[$name]}")
  redis-server --port "${RPORT[$name]}" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
    --logfile "" >/dev/null
  case $r in
  haproxy)
    printf 'global\n  maxconn 8192\n  nbthread 1\ndefaults\n  mode tcp\n  timeout connect 5s\n  timeout client 120s\n  timeout server 120s\nlisten redis\n  bind 127.0.0.1:%s\n  server s1 127.0.0.1:%s\n' \
      "${PORT[$name]}" "${RPORT[$name]}" >"$tmp/hap.cfg"
    haproxy -db -f "$tmp/hap.cfg" >/dev/null 2>&1 & ;;
  minrelay) "$tmp/minrelay" "${PORT[$name]}" "${RPORT[$name]}" & ;;
  *) "${r#*=}" -q relay --workers 1 "tcp-listen:127.0.0.1:${PORT[$name]}" "tcp:127.0.0.1:${RPORT[$name]}" 2>/dev/null & ;;
  esac
  PID[$name]=$!; pids+=($!)
done
sleep 1
EV=$(perf list 2>/dev/null | grep -oE 'syscalls:sys_enter_(read|write|recvfrom|sendto|epoll_wait|epoll_pwait|epoll_ctl|accept4|socket|connect|close|shutdown|getsockopt|setsockopt|getpeername|fcntl|clock_gettime)\b' | sort -u | paste -sd,)
[[ -n $EV ]] || PERF=0
for round in $(seq "$ROUNDS"); do
  for r in "${relays[@]}"; do
    name=${r%%=*}; port=${PORT[$name]}; rp=${RPORT[$name]}
    sleep 1
    if ((PERF)); then
      perf stat -x, -e "$EV,context-switches" -p "${PID[$name]}" -o "$tmp/perf" & ps_pid=$!
      sleep 0.3
    fi
    nstat -n
    out=$(redis-benchmark -p "$port" -n "$N" -c 20 -k 0 -t ping_inline -q 2>&1 | tr '\r' '\n' | grep 'per second' | tail -1)
    wire=$(nstat -z 2>/dev/null | grep -E '^(Tcp|TcpExt)')
    if ((PERF)); then kill -INT $ps_pid; wait $ps_pid 2>/dev/null; fi
    echo "== $name, round $round: $out"
    echo "$wire" | awk -v n="$N" '$2 > 0 && $2 / n >= 0.005 {printf "  %-26s %7.3f a connection\n", $1, $2 / n}'
    ss -tanH state time-wait | awk -v p="$port" -v rp="$rp" '{split($3, a, ":"); split($4, b, ":")
      if (b[2] == p) c["the client'\''s end of client -> relay"]++; else if (a[2] == p) c["the relay'\''s end of client -> relay"]++
      else if (b[2] == rp) c["the relay'\''s end of relay -> redis"]++; else if (a[2] == rp) c["redis'\''s end"]++}
      END {for (k in c) printf "  TIME_WAIT on %s: %d\n", k, c[k]}'
    if ((PERF)); then
      awk -F, -v n="$N" '$1 + 0 > 0 {sub("syscalls:sys_enter_", "", $3); printf "%s %.2f  ", $3, $1 / n} END {print ""}' "$tmp/perf" |
        sed 's/^/  calls a connection: /'
    fi
  done
done
