#!/usr/bin/env bash
# bench/per_event.sh: where a relay spends its syscalls (strace) and its CPU (perf), for
# bench/NOTEBOOK.md#relay-per-event-cost. Run after bench/run has built zerocat and
# bench/work/{zcb,refrelay} (or build them: cargo build --release; cc as in lib/peers.py).
#
#   bench/per_event.sh redis RELAY      strace -c -f of RELAY (zerocat|haproxy) during one
#                                       redis-benchmark keep-alive run and one -k 0 run
#   bench/per_event.sh bulk TOOL [MiB] [PAIR]
#                                       strace of TOOL (zerocat|rw|splice) relaying MiB
#                                       (default 512) over PAIR (tcp-to-unix, the default, or
#                                       tcp-to-tcp): -c summary, and splice, ioctl and epoll
#                                       calls counted by kind. ZC=PATH: another zerocat.
#   bench/per_event.sh perf RELAY       perf record of RELAY during redis-benchmark keep-alive
#
# Output under bench/work/per_event/. strace slows the traced process several-fold, which
# changes how much each call moves: read counts per request or per MiB, not times.
set -euo pipefail
cd "$(dirname "$0")/.."
ZC=${ZC:-$PWD/target/release/zerocat}
ZCB=$PWD/bench/work/zcb
REF=$PWD/bench/work/refrelay
OUT=$PWD/bench/work/per_event
mkdir -p "$OUT"
tmp=$(mktemp -d /tmp/zcpe.XXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 500); do ss -ltnH "sport = :$1" | grep -q . && return 0; sleep 0.01; done; echo "nothing on $1" >&2; return 1; }

# Starts RELAY from 127.0.0.1:$lport to 127.0.0.1:$1; sets relay_pid.
start_relay() {
  local backend=$1
  lport=$(free_port)
  case $relay in
    zerocat) "$ZC" relay "tcp-listen:127.0.0.1:$lport" "tcp:127.0.0.1:$backend" 2>"$tmp/relay.err" & ;;
    haproxy)
      printf 'global\n    nbthread 1\n    maxconn 4000\n\ndefaults\n    mode tcp\n    timeout connect 5s\n    timeout client 120s\n    timeout server 120s\n\nlisten relay\n    bind 127.0.0.1:%s\n    server backend 127.0.0.1:%s\n' "$lport" "$backend" >"$tmp/haproxy.cfg"
      haproxy -db -f "$tmp/haproxy.cfg" 2>"$tmp/relay.err" & ;;
    *) echo "relay: zerocat or haproxy" >&2; exit 2 ;;
  esac
  relay_pid=$!
  pids+=("$relay_pid")
  wait_port "$lport"
}

start_redis() {
  rport=$(free_port)
  redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --protected-mode no --logfile "" >/dev/null &
  pids+=($!)
  wait_port "$rport"
}

redis_strace() {
  start_redis
  start_relay "$rport"
  for mode in "ka:-n 50000 -c 50 -t set,get" "k0:-n 20000 -k 0 -c 20 -t ping_inline"; do
    name=${mode%%:*} args=${mode#*:}
    strace -c -f -p "$relay_pid" -o "$OUT/redis-$relay-$name.strace" &
    spid=$!
    sleep 0.5
    # shellcheck disable=SC2086
    redis-benchmark -p "$lport" -q $args | tr '\r' '\n' | grep 'requests per second' | tee "$OUT/redis-$relay-$name.rps"
    kill -INT "$spid"; wait "$spid" || true
    echo "== $relay $name: $OUT/redis-$relay-$name.strace"
    head -25 "$OUT/redis-$relay-$name.strace"
  done
}

redis_perf() {
  start_redis
  start_relay "$rport"
  perf record -F 2999 -g -p "$relay_pid" -o "$OUT/perf-$relay.data" 2>/dev/null &
  ppid_=$!
  sleep 0.5
  redis-benchmark -p "$lport" -q -n 100000 -c 50 -t set,get | tr '\r' '\n' | grep 'requests per second'
  kill -INT "$ppid_"; wait "$ppid_" || true
  perf report -i "$OUT/perf-$relay.data" --stdio --no-children --sort dso,symbol 2>/dev/null \
    | grep -v '^$' | grep '%' | head -60 | tee "$OUT/perf-$relay.txt"
}

bulk_strace() {
  local tool=$1 mib=${2:-512} pair=${3:-tcp-to-unix} name
  head -c "$((mib << 20))" /dev/urandom >"$tmp/data"
  case $pair in
    tcp-to-unix) name=$tool ;;
    tcp-to-tcp) name=$tool-tcp ;;
    *) echo "bulk: PAIR is tcp-to-unix or tcp-to-tcp" >&2; exit 2 ;;
  esac
  for pass in summary calls; do
    if [ $pass = summary ]; then sopt=(-c); else sopt=(-e trace=splice,ioctl,epoll_ctl,epoll_pwait,epoll_wait,read,write); fi
    rm -f "$tmp/b.sock" "$tmp/relay.out" "$tmp/relay.err" "$tmp/sink.out"
    if [ "$pair" = tcp-to-unix ]; then
      "$ZCB" sink 0 "$tmp/sample" "unix-listen:$tmp/b.sock" >"$tmp/sink.out" &
      sink=$!
      for _ in $(seq 500); do [ -S "$tmp/b.sock" ] && break; sleep 0.01; done
      backend=unix:$tmp/b.sock
    else
      "$ZCB" sink 0 "$tmp/sample" "tcp-listen:127.0.0.1:0" >"$tmp/sink.out" &
      sink=$!
      for _ in $(seq 500); do [ -s "$tmp/sink.out" ] && break; sleep 0.01; done
      backend=tcp:127.0.0.1:$(head -1 "$tmp/sink.out")
    fi
    case $tool in
      zerocat) relay_cmd=("$ZC" --stats json relay --once "tcp-listen:127.0.0.1:0" "$backend") ;;
      rw|splice) relay_cmd=("$REF" "$tool" "tcp-listen:127.0.0.1:0" "$backend") ;;
      *) echo "bulk: zerocat, rw or splice" >&2; exit 2 ;;
    esac
    strace -f "${sopt[@]}" -o "$OUT/bulk-$name-$pass.strace" "${relay_cmd[@]}" >"$tmp/relay.out" 2>"$tmp/relay.err" &
    spid=$!
    port=
    for _ in $(seq 1000); do  # a whole line: zerocat writes "listening on ADDR" in pieces
      port=$(cat "$tmp/relay.out" "$tmp/relay.err" 2>/dev/null | sed -nE 's/^([0-9]+)$/\1/p; s/.*listening on 127\.0\.0\.1:([0-9]+)$/\1/p' | head -1)
      [ -n "$port" ] && [ -z "$(tail -c1 "$tmp/relay.err")" ] && [ -z "$(tail -c1 "$tmp/relay.out")" ] && break
      port=; sleep 0.01
    done
    "$ZCB" src "$tmp/data" 262144 "tcp:127.0.0.1:$port"
    wait "$spid" "$sink"
    echo "sink got $(tail -1 "$tmp/sink.out") bytes (want $((mib << 20)))"
    [ $pass = summary ] && grep -o '"path[^]]*]' "$tmp/relay.err" | head -2 || true
  done
  f=$OUT/bulk-$name-calls.strace
  echo "== $tool, $mib MiB $pair, 256 KiB writes"
  head -30 "$OUT/bulk-$name-summary.strace"
  python3 - "$f" "$mib" <<'EOF'
import collections, re, sys
path, mib = sys.argv[1], int(sys.argv[2])
c = collections.Counter()
moved = collections.Counter()
for ln in open(path):
    m = re.match(r"\d+\s+(\w+)\((.*)\)\s+=\s+(-?\d+)", ln)
    if not m:
        continue
    call, args, ret = m.group(1), m.group(2), int(m.group(3))
    if call == "ioctl":
        call += " " + args.split(",")[1].strip()
    elif call == "epoll_ctl":
        call += " " + args.split(",")[1].strip()
    elif call == "splice" and ret > 0:
        moved[call] += ret
    if ret < 0:
        call += " (error)"
    c[call] += 1
for k, v in sorted(c.items(), key=lambda kv: -kv[1]):
    print(f"{k:<40} {v:>9}  {v / mib:8.1f} per MiB")
if c["splice"]:
    print(f"mean bytes per successful splice: {moved['splice'] / c['splice']:.0f}")
EOF
}

case ${1:-} in
  redis) relay=${2:?zerocat or haproxy}; redis_strace ;;
  perf) relay=${2:?zerocat or haproxy}; redis_perf ;;
  bulk) bulk_strace "${2:?zerocat, rw or splice}" "${3:-512}" "${4:-tcp-to-unix}" ;;
  *) sed -n '2,16p' "$0"; exit 2 ;;
esac
