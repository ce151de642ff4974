#!/usr/bin/env python3
"""Run inside a private netns: keep-alive redis-benchmark through each relay, counters per request."""
import os, subprocess, sys, time, tempfile, statistics

def counters():
    out = {}
    for f in ("/proc/net/snmp", "/proc/net/netstat"):
        lines = open(f).read().splitlines()
        for h, v in zip(lines[0::2], lines[1::2]):
            hk = h.split(); vk = v.split()
            pre = hk[0].rstrip(':')
            for k, x in zip(hk[1:], vk[1:]):
                out[pre + k] = int(x)
    return out

def proc(pid):
    st = open(f"/proc/{pid}/stat").read().rsplit(')', 1)[1].split()
    cpu = int(st[11]) + int(st[12])
    vol = inv = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        for line in open(f"/proc/{pid}/task/{t}/status"):
            if line.startswith("voluntary_ctxt_switches"): vol += int(line.split()[1])
            if line.startswith("nonvoluntary_ctxt_switches"): inv += int(line.split()[1])
    return cpu, vol, inv

subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
tmp = tempfile.mkdtemp()
RP, HP, ZP = 16379, 16380, 16381
rs = subprocess.Popen(["redis-server", "--port", str(RP), "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
cfg = f"""global
  maxconn 8192
  nbthread 1
defaults
  mode tcp
  timeout connect 5s
  timeout client 120s
  timeout server 120s
listen redis
  bind 127.0.0.1:{HP}
  server s1 127.0.0.1:{RP}
"""
open(f"{tmp}/h.cfg", "w").write(cfg)
hp = subprocess.Popen(["haproxy", "-db", "-f", f"{tmp}/h.cfg"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
relays = {"none": (RP, rs.pid), "haproxy": (HP, hp.pid)}
port = ZP
for spec in sys.argv[1:]:
    name, binary = spec.split("=", 1)
    args = binary.split(",")
    p = subprocess.Popen([args[0], "-q", "relay", *args[1:], f"tcp-listen:127.0.0.1:{port}", f"tcp:127.0.0.1:{RP}"], stderr=subprocess.DEVNULL)
    relays[name] = (port, p.pid); port += 1
time.sleep(0.5)
KEYS = ["TcpOutSegs", "TcpInSegs", "TcpExtDelayedACKs", "TcpExtTCPPureAcks", "TcpExtTCPHPAcks", "TcpExtTCPHPHits",
        "TcpExtTCPAutoCorking", "TcpExtTCPBacklogCoalesce", "TcpExtTCPDelivered", "TcpExtTCPOrigDataSent",
        "TcpExtTCPAckCompressed", "TcpExtTCPRcvCoalesce", "TcpExtTCPWantZeroWindowAdv", "TcpExtTCPBacklogDrop",
        "TcpExtTCPToZeroWindowAdv", "TcpExtTCPFromZeroWindowAdv", "TcpExtTCPDSACKRecv"]
rounds = int(os.environ.get("ROUNDS", "3")); N = int(os.environ.get("NREQ", "50000"))
res = {k: [] for k in relays}
for r in range(rounds):
    for name, (p, pid) in relays.items():
        c0 = counters(); p0 = proc(pid); t0 = time.time()
        out = subprocess.run(["redis-benchmark", "-p", str(p), "-q", "-n", str(N), "-c", "50", "-t", "set,get"], capture_output=True, text=True).stdout
        t1 = time.time(); p1 = proc(pid); c1 = counters()
        rps = [float(l.split()[1]) for l in out.replace('\r', '\n').splitlines() if "requests per second" in l]
        req = 2 * N
        row = {"rps": statistics.mean(rps) if rps else 0, "cpu_us": (p1[0]-p0[0]) * 1e4 / req, "vol": (p1[1]-p0[1]) / req, "inv": (p1[2]-p0[2]) / req}
        for k in KEYS: row[k] = (c1.get(k, 0) - c0.get(k, 0)) / req
        res[name].append(row)
cols = ["rps", "cpu_us", "vol", "inv"] + KEYS
print("relay " + " ".join(c.replace("TcpExt", "").replace("Tcp", "") for c in cols))
for name, rows in res.items():
    med = {c: statistics.median(r[c] for r in rows) for c in cols}
    print(name, " ".join(f"{med[c]:.0f}" if c == "rps" else f"{med[c]:.3f}" for c in cols))
for p in list(relays.values())[1:]:
    try: os.kill(p[1], 15)
    except Exception: pass
rs.terminate()
