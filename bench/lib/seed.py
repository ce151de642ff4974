"""The seed table: acln0/zerocopy's transfer benchmark (relay throughput per chunk size)
for zerocat relay --via userspace, --via splice and auto, and the two reference relays of
bench/refrelay.c, with its plot."""
import os
import sys

from .common import KiB, MiB, log, quiet
from .measure import contender, scenario
from .relay import run_relay
from .table import mbs, status

GROUP = "seed"
CHUNKS = [1 << k for k in range(10, 21)]  # 1 KiB .. 1 MiB, as in the seed table
SEED_PAIRS = ["tcp-to-tcp", "unix-to-tcp", "tcp-to-unix", "unix-to-unix"]


def seed_pinning():
    """The seed table's CPU placement: the relay alone on the last CPU, feeder and sink on
    the others. Unpinned, three busy processes on two cores ran the same binary at 1.7 or
    3.4 GB/s depending on which two shared a core, which drowned a 5% criterion."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    return {"tool": {cpus[-1]}, "src": set(cpus[:-1]), "sink": set(cpus[:-1])}


def scenarios(ctx):
    S = []
    for pair in SEED_PAIRS:
        for chunk in CHUNKS:
            def runner(via, pair=pair, chunk=chunk):
                return lambda: run_relay(ctx, ("zerocat", via), pair, chunk, ctx["seed_size"], seed_pinning())
            def ref(kind, pair=pair, chunk=chunk):
                return lambda: run_relay(ctx, ("ref", kind), pair, chunk, ctx["seed_size"], seed_pinning())
            cs = [contender("userspace", "zerocat", runner("userspace"), ("relay",)),
                  contender("splice", "zerocat", runner("splice"), ("relay",)),
                  contender("auto", "zerocat", runner(None), ("relay",)),
                  contender("ref rw", "peer", ref("rw")),
                  contender("ref splice", "peer", ref("splice"))]
            S.append(scenario(GROUP, f"Transfer/{pair}/{chunk}", ctx["seed_size"], cs, ref="auto"))
    return S


def table(rows, plot_file):
    """RESULTS.md's seed-table section (written even when the group did not run)."""
    L = ["## seed table: relay throughput by chunk size, --via userspace (old) vs auto (new)\n",
         "The layout of acln0/zerocopy's README transfer benchmark. The sender write()s chunks of the "
         "given size into the relay; MB/s = 10^6 bytes/s (median); speedup = the per-repetition ratio "
         "t(userspace)/t(auto), median. `--via splice` runs beside them: `auto/best` is auto's median "
         "throughput over the better of the userspace and splice medians (the target is >= 0.95). "
         "Each run pins the relay to the last CPU and the feeder and sink to the others (see seed_pinning "
         "in bench/lib/seed.py): unpinned, the placement of three busy processes on two cores swung one binary "
         "by 2x. `ref rw` and `ref splice` are the reference relays of bench/refrelay.c (blocking, a thread per "
         "direction; read/write through 1 MiB, splice through a 1 MiB pipe): `auto/ref` is auto's throughput "
         "over the better of the two (the target is >= 0.95 from 16 KiB up), and the CPU columns are "
         "CPU-s/GiB of the relay (median).", ""]
    seed = [r for r in rows if r["group"] == GROUP]
    notes = sorted({status(r) for r in seed if status(r)})
    by = {(r["scenario"], r["tool"]): r for r in seed}
    L += ["```", f"{'benchmark':<40} {'old MB/s':>9} {'new MB/s':>9} {'speedup':>8} {'splice MB/s':>11} "
          f"{'auto/best':>9} {'ref rw':>8} {'ref splice':>10} {'auto/ref':>8} {'CPU auto':>8} {'CPU ref':>8}"]
    for pair in SEED_PAIRS:
        for chunk in CHUNKS:
            name = f"Transfer/{pair}/{chunk}"
            u, a, sp_row = by.get((name, "userspace")), by.get((name, "auto")), by.get((name, "splice"))
            rw, rs = by.get((name, "ref rw")), by.get((name, "ref splice"))
            if not u or not a:
                continue
            cell = lambda r: f"{mbs(r, r['median']):.2f}" if r and r["median"] else "-"
            sp = f"{u['ratio']:.2f}x" if u["ratio"] else "-"
            rates = [mbs(r, r["median"]) for r in (u, sp_row) if r and r["median"]]
            best = f"{mbs(a, a['median']) / max(rates):.2f}" if a["median"] and rates else "-"
            refs = [mbs(r, r["median"]) for r in (rw, rs) if r and r["median"]]
            vs_ref = f"{mbs(a, a['median']) / max(refs):.2f}" if a["median"] and refs else "-"
            cpu = lambda r: f"{r['cpu']:.2f}" if r and r["cpu"] is not None else "-"
            ref_cpus = [r["cpu"] for r in (rw, rs) if r and r["cpu"] is not None]
            L.append(f"{name:<40} {cell(u):>9} {cell(a):>9} {sp:>8} {cell(sp_row):>11} {best:>9} {cell(rw):>8} "
                     f"{cell(rs):>10} {vs_ref:>8} {cpu(a):>8} {(f'{min(ref_cpus):.2f}' if ref_cpus else '-'):>8}")
    L += ["```", ""]
    paths = sorted({r["path"] for r in seed if r["tool"] == "auto" and r["path"]})
    if paths:
        L.append(f"auto ran: {', '.join(paths)}.")
    L += [f"Note: {n}." for n in notes]
    if plot_file:
        L += ["", f"![seed table]({plot_file})"]
    return L


def series(rows):
    out = {}
    for r in rows:
        if r["group"] == GROUP and r["median"]:
            pair, chunk = r["scenario"].split("/")[1:]
            out.setdefault(pair, {}).setdefault(r["tool"], []).append((int(chunk), mbs(r, r["median"])))
    return out


def plot(rows, out, svg):
    """Draws the seed table into `out` (seed.png, or seed.svg when asked or when matplotlib
    fails); returns the file name, or None when there is nothing to draw."""
    data = series(rows)
    if not data:
        return None
    os.makedirs(out, exist_ok=True)
    if not svg and plot_png_or_say(data, os.path.join(out, "seed.png")):
        return "seed.png"
    plot_svg(data, os.path.join(out, "seed.svg"))
    return "seed.svg"


def plot_png(series, path):
    try:
        import matplotlib
    except ImportError:
        if quiet([sys.executable, "-m", "pip", "install", "--quiet", "matplotlib"], timeout=600).returncode:
            return False
        import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    for ax, pair in zip(axes.flat, SEED_PAIRS):
        for tool, style in (("userspace", "o--"), ("splice", "^:"), ("auto", "s-"), ("ref rw", "x-."),
                            ("ref splice", "+-.")):
            pts = sorted(series.get(pair, {}).get(tool, []))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=tool)
        ax.set_xscale("log", base=2)
        ax.set_xticks(CHUNKS, [f"{c // KiB}K" if c < MiB else "1M" for c in CHUNKS], fontsize=8)
        ax.set_title(pair)
        ax.set_ylabel("MB/s")
        ax.grid(True, alpha=0.3)
        ax.legend()
    for ax in axes[1]:
        ax.set_xlabel("chunk size (bytes)")
    fig.suptitle("zerocat relay: --via userspace, --via splice and auto")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def plot_png_or_say(series, path):
    """The PNG plot, or False (and why) so the SVG is drawn instead: a plot is no reason
    to fail a run whose rows all completed."""
    try:
        return plot_png(series, path)
    except Exception as e:  # matplotlib missing pieces, fonts, a broken install…
        log(f"matplotlib failed ({type(e).__name__}: {e}); drawing the SVG instead")
        return False


def plot_svg(series, path):
    W, H, PW, PH = 1000, 670, 420, 260
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="14">zerocat relay: --via userspace, --via splice and auto (MB/s by chunk size)</text>']
    for i, pair in enumerate(SEED_PAIRS):
        ox, oy = 60 + (i % 2) * (PW + 70), 45 + (i // 2) * (PH + 65)
        data = series.get(pair, {})
        top = max([v for pts in data.values() for _, v in pts] + [1]) * 1.1
        x = lambda c: ox + (c.bit_length() - 11) / 10 * PW
        y = lambda v: oy + PH - v / top * PH
        out.append(f'<rect x="{ox}" y="{oy}" width="{PW}" height="{PH}" fill="none" stroke="#888"/>')
        out.append(f'<text x="{ox + PW / 2}" y="{oy - 5}" text-anchor="middle">{pair}</text>')
        for c in CHUNKS[::2]:
            out.append(f'<text x="{x(c)}" y="{oy + PH + 14}" text-anchor="middle">{c // KiB}K</text>')
        for k in range(5):
            v = top * k / 4
            out.append(f'<text x="{ox - 4}" y="{y(v) + 4}" text-anchor="end">{v:.0f}</text>')
        for j, (tool, color) in enumerate((("userspace", "#d62728"), ("splice", "#2ca02c"), ("auto", "#1f77b4"),
                                           ("ref rw", "#7f7f7f"), ("ref splice", "#bcbd22"))):
            pts = sorted(data.get(tool, []))
            if pts:
                out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                           + " ".join(f"{x(c):.1f},{y(v):.1f}" for c, v in pts) + '"/>')
            out.append(f'<text x="{ox + 10}" y="{oy + 15 + 14 * j}" fill="{color}">{tool}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
