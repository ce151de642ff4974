"""The outputs of a run: results.csv (every row) and RESULTS.md (the meta lines, one
table per group, then what the families add), and for a snapshot under bench/results/ its
line in that folder's index."""
import csv
import os

from .common import RESULTS, GiB, human

GROUPS = ("pipe", "tee", "copy", "trees", "relay", "ops", "exec", "udp", "proxy", "tls", "http", "s3", "names", "nc")


def gibs(r, t):
    return r["bytes"] / GiB / t


def mbs(r, t):
    return r["bytes"] / 1e6 / t


def status(r):
    return r["skip"] or (f"FAILED: {r['error']}" if r["error"] else "")


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["group", "scenario", "tool", "bytes", "runs", "median_s", "min_s", "max_s", "gib_s",
                    "gib_s_min", "gib_s_max", "mb_s", "cpu_s_per_gib", "ratio_vs_ref", "path", "status"])
        for r in rows:
            ok = r["median"] is not None
            w.writerow([r["group"], r["scenario"], r["tool"], r["bytes"], len(r["runs"]),
                        *(f"{x:.6f}" if ok else "" for x in (r["median"] or 0, r["lo"] or 0, r["hi"] or 0)),
                        *(f"{x:.3f}" if ok else "" for x in (
                            gibs(r, r["median"] or 1), gibs(r, r["hi"] or 1), gibs(r, r["lo"] or 1), mbs(r, r["median"] or 1))),
                        f"{r['cpu']:.3f}" if r["cpu"] is not None else "",
                        f"{r['ratio']:.3f}" if r["ratio"] is not None else "", r["path"], status(r)])


def markdown(rows, meta, after_group, tail):
    """RESULTS.md's lines. after_group: group -> lines placed under that group's table;
    tail: lines at the end."""
    L = ["# zerocat benchmarks\n", f"- date: {meta['date']}", f"- command: `{meta['command']}`",
         f"- machine: {meta['machine']}", f"- load average: {meta['load0']} at the start, {meta['load1']} at the end",
         f"- size: {human(meta['size'])} per run ({human(meta['seed_size'])} per seed-table run); "
         f"{meta['runs']} timed run(s) per row{' after a warm-up' if meta['warmup'] else ', no warm-up'}",
         "- versions: " + "; ".join(meta["versions"]), "",
         "Each row: the median time's throughput, the min–max over the runs, the CPU (user+sys, wait4) of the "
         "tool under test per GiB, and **×ref**: per repetition, this tool's time divided by the reference's "
         "(zerocat, or `auto` in the seed table), then the median — above 1 means zerocat was faster. Every "
         "run's bytes were checked (count + sha256 of 4 KiB windows at random offsets; for /dev/null the "
         "kernel's wchar/rchar or zerocat's own count). The ceiling rows feed bench/zcb straight into its sink "
         "through a default 64 KiB pipe (zerocat may grow its pipes, so it can beat that ceiling); the relay "
         "group's ceiling is the feeder connected straight to the sink.",
         ""]
    if meta["check"]:
        L.insert(1, "**--check run: one run, no warm-up. Correctness only; these times mean nothing.**\n")
    for group in GROUPS:
        if not any(r["group"] == group for r in rows):
            continue
        L.append(f"## {group}\n")
        plain = [r for r in rows if r["group"] == group and not r.get("requests")]
        if plain:  # a group of only timed or requests rows (nc) has its own tables
            L += ["| scenario | tool | GiB/s | min–max | CPU s/GiB | ×ref | zerocat path | note |",
                  "|---|---|---:|---:|---:|---:|---|---|"]
        for r in plain:
            ok = r["median"] is not None
            L.append(f"| {r['scenario']} | {r['tool']} | {gibs(r, r['median']):.2f} | "
                     f"{gibs(r, r['hi']):.2f}–{gibs(r, r['lo']):.2f} | " if ok else f"| {r['scenario']} | {r['tool']} | | | ")
            L[-1] += (f"{r['cpu']:.2f}" if r["cpu"] is not None else "–") + " | " + \
                (f"{r['ratio']:.2f}" if r["ratio"] is not None else "") + f" | {r['path']} | {status(r) or r.get('note', '')} |"
        L.append("")
        L += after_group.get(group, [])
    return L + tail


def index_row(out, meta):
    """A snapshot under bench/results/ gets a line in bench/results/README.md's index (once;
    edit its "what was measured" by hand to say why the run was made)."""
    index = os.path.join(RESULTS, "README.md")
    if os.path.dirname(os.path.abspath(out)) != RESULTS or not os.path.exists(index):
        return
    name = os.path.basename(os.path.abspath(out))
    link = f"[{name}/]({name}/)"
    with open(index) as f:
        if link in f.read():
            return
    commit = meta["versions"][0].rsplit("(", 1)[-1].rstrip(")")
    what = f"`{meta['command']}` ({human(meta['size'])}, {meta['runs']} run(s) per row)"
    with open(index, "a") as f:
        f.write(f"| {link} | {meta['date'][:10]} | {what} | {commit} | |\n")


def write_outputs(out, rows, meta, after_group, tail):
    os.makedirs(out, exist_ok=True)
    write_csv(os.path.join(out, "results.csv"), rows)
    with open(os.path.join(out, "RESULTS.md"), "w") as f:
        f.write("\n".join(markdown(rows, meta, after_group, tail)) + "\n")
    index_row(out, meta)
