#!/usr/bin/env python3
"""Autogroup A/B: keep-alive redis-benchmark (-n 50000 -c 50 -t set,get, as relaycost.sh) through
relays that run either in the benchmark's own session (autogroup) or in one of their own, as
relaycost.sh's daemonized haproxy (-D) and redis-server (--daemonize) do. Every new autogroup
gets NICE (default -19, like the caller's, so others' load stays out)."""
import os, subprocess, sys, time, statistics, tempfile
NICE = os.environ.get("NICE", "-19"); ROUNDS = int(os.environ.get("ROUNDS", "5"))
MODE = os.environ.get("MODE", "ka")
ARGS = {"ka": ["-n", "50000", "-c", "50", "-t", "set,get"], "nc": ["-n", "20000", "-c", "20", "-k", "0", "-t", "ping_inline"]}[MODE]
tmp = tempfile.mkdtemp(); RP = 16379
def own(p):
    open(f"/proc/{p.pid}/autogroup", "w").write(NICE)
procs = []
rs = subprocess.Popen(["redis-server", "--port", str(RP), "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL, start_new_session=True); own(rs); procs.append(rs)
port = 16380; relays = {}
for spec in sys.argv[1:]:
    name, kind = spec.split("=", 1)
    own_group = name.endswith("-own")
    if kind == "haproxy":
        open(f"{tmp}/{port}.cfg", "w").write(f"global\n  maxconn 8192\n  nbthread 1\ndefaults\n  mode tcp\n  timeout connect 5s\n  timeout client 120s\n  timeout server 120s\nlisten redis\n  bind 127.0.0.1:{port}\n  server s1 127.0.0.1:{RP}\n")
        cmd = ["haproxy", "-db", "-f", f"{tmp}/{port}.cfg"]
    else:
        a = kind.split(",")
        cmd = [a[0], "-q", "relay", *a[1:], f"tcp-listen:127.0.0.1:{port}", f"tcp:127.0.0.1:{RP}"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=own_group)
    if own_group: own(p)
    procs.append(p); relays[name] = port; port += 1
time.sleep(0.7)
def rps(port):
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-q", *ARGS], capture_output=True, text=True).stdout
    v = [float(l.split()[1]) for l in out.replace("\r", "\n").splitlines() if "requests per second" in l]
    return statistics.mean(v) if v else 0.0
res = {n: [] for n in relays}; res["none"] = []
names = list(relays)
for r in range(ROUNDS):
    res["none"].append(rps(RP))
    order = names[r % len(names):] + names[:r % len(names)]
    for n in order:
        res[n].append(rps(relays[n]))
    print(f"round {r+1}: " + " ".join(f"{n} {res[n][-1]:.0f}" for n in ["none"] + names), "load", open("/proc/loadavg").read().split()[0], flush=True)
for p in procs: p.terminate()
print("medians: " + " ".join(f"{n} {statistics.median(v):.0f}" for n, v in res.items()))
