import sys, subprocess, re, collections
for base in sys.argv[1:]:
    ids = dict(kv.split("=") for kv in open(base + ".pids").read().split()[1:])
    pid2name = {int(v): k for k, v in ids.items()}
    out = subprocess.run(["perf", "script", "-i", base + ".perf", "-F", "tid,cpu,time,event,trace"], capture_output=True, text=True).stdout
    sw = collections.Counter(); pre = collections.Counter(); wakes = collections.Counter(); t0 = t1 = None
    runs = collections.defaultdict(float); last_in = {}; cpu_of = collections.defaultdict(collections.Counter)
    for line in out.splitlines():
        m = re.match(r'\s*(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s+(.*)', line)
        if not m: continue
        tid, cpu, t, ev, rest = int(m.group(1)), int(m.group(2)), float(m.group(3)), m.group(4), m.group(5)
        t0 = t0 or t; t1 = t
        if ev == "sched:sched_switch":
            pp = int(re.search(r'prev_pid=(\d+)', rest).group(1)); st = re.search(r'prev_state=(\S+)', rest).group(1)
            np_ = int(re.search(r'next_pid=(\d+)', rest).group(1)); nc = re.search(r'next_comm=(\S+)', rest).group(1)
            if pp in pid2name:
                who = pid2name[pp]; nxt = pid2name.get(np_, "other" if np_ else "idle")
                sw[(who, "sleep" if st.startswith("S") else "preempted", nxt)] += 1
                if pp in last_in: runs[who] += t - last_in.pop(pp)
            if np_ in pid2name:
                last_in[np_] = t; cpu_of[pid2name[np_]][cpu] += 1
        elif ev == "sched:sched_wakeup":
            wp = int(re.search(r' pid=(\d+)', rest).group(1))
            if wp in pid2name:
                wakes[(pid2name.get(tid, "other" if tid else "irq/idle"), pid2name[wp])] += 1
    dur = t1 - t0
    rb = open(base + ".rb").read().replace("\r", "\n")
    print(f"== {base} ({dur:.2f}s)")
    for who in ("relay", "redis", "bench"):
        s = {k[1:]: v for k, v in sw.items() if k[0] == who}
        tot_sleep = sum(v for k, v in s.items() if k[0] == "sleep"); tot_pre = sum(v for k, v in s.items() if k[0] == "preempted")
        print(f"  {who}: ran {runs[who]/dur*100:.0f}% of a CPU; sleeps/s {tot_sleep/dur:.0f}, preempted/s {tot_pre/dur:.0f}; "
              f"preempted by: { {k[1]: round(v/dur) for k, v in s.items() if k[0]=='preempted'} }; cpus {dict(cpu_of[who])}")
    print("  wakeups/s (waker->wakee):", {f"{a}->{b}": round(v/dur) for (a, b), v in sorted(wakes.items())})
