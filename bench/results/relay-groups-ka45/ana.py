import sys, subprocess, collections, re
NAMES = {0:"read",1:"write",7:"poll",23:"select",44:"sendto",45:"recvfrom",46:"sendmsg",47:"recvmsg",232:"epoll_wait",281:"epoll_pwait",233:"epoll_ctl",228:"clock_gettime",24:"sched_yield",3:"close",43:"accept4",288:"accept4",42:"connect",41:"socket",54:"setsockopt",55:"getsockopt",48:"shutdown",72:"fcntl"}
for f in sys.argv[1:]:
    out = subprocess.run(["perf","script","-i",f,"-F","tid,cpu,time,event,trace"],capture_output=True,text=True).stdout
    calls = collections.Counter(); batch = collections.Counter(); sw = collections.Counter(); wk = collections.Counter()
    last_enter = {}; eagain = collections.Counter(); t0=t1=None; wake_cpu=collections.Counter(); ncpu=collections.Counter()
    for line in out.splitlines():
        m = re.match(r'\s*(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s+(.*)', line)
        if not m: continue
        tid, cpu, t, ev, rest = m.groups(); t=float(t)
        t0 = t0 or t; t1 = t
        if ev == "raw_syscalls:sys_enter":
            nr = int(rest.split()[1]); calls[nr]+=1; ncpu[cpu]+=1
        elif ev == "raw_syscalls:sys_exit":
            mm = re.match(r'NR (-?\d+) = (-?\d+)', rest); nr=int(mm.group(1)); r=int(mm.group(2))
            if nr in (232,281): batch[r]+=1
            if r == -11: eagain[nr]+=1
        elif ev == "sched:sched_switch":
            st = re.search(r'prev_state=(\S+)', rest).group(1); sw[st]+=1
        elif ev == "sched:sched_wakeup":
            c = re.search(r'comm=(\S+)', rest).group(1); tc = re.search(r'target_cpu=(\d+)', rest).group(1)
            wk[c]+=1; wake_cpu[(c, "same" if int(tc)==int(cpu) else "other")]+=1
    req = calls[1]/2 + calls[44]/2
    print(f"== {f}: {t1-t0:.2f}s, requests {req:.0f} ({req/(t1-t0):.0f}/s under perf)")
    print("  calls/req:", ", ".join(f"{NAMES.get(k,k)} {v/req:.3f}" for k,v in calls.most_common()))
    print("  EAGAIN/req:", ", ".join(f"{NAMES.get(k,k)} {v/req:.3f}" for k,v in eagain.items()))
    waits = sum(batch.values()); ev = sum(k*v for k,v in batch.items())
    print(f"  waits {waits}, mean batch {ev/max(waits,1):.1f}, req per wait {req/max(waits,1):.1f}; zero-returns {batch[0]}")
    hist = collections.Counter()
    for k,v in batch.items():
        b = 0 if k==0 else (1 if k==1 else (2 if k<4 else (4 if k<8 else (8 if k<16 else (16 if k<32 else (32 if k<64 else 64))))))
        hist[b]+=v
    print("  batch hist (waits):", dict(sorted(hist.items())))
    print("  switches out/req:", {k: round(v/req,4) for k,v in sw.items()})
    print("  wakeups made/req:", {k: round(v/req,3) for k,v in wk.items()}, {f"{a}/{b}": round(v/req,3) for (a,b),v in wake_cpu.items()})
    print("  cpu of syscalls:", dict(ncpu))
