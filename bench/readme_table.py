#!/usr/bin/env python3
"""bench/readme_table.py RESULTS_DIR [README]: makes one run the headline. Rewrites the
performance table (between `<!-- bench-table -->` and `<!-- /bench-table -->`) of README.md
and of bench/RESULTS.md from that run's results.csv and the head of its RESULTS.md (date,
machine, size, runs), so both quote one run and say which. RESULTS_DIR is a full run's
snapshot, e.g. bench/results/full-681d7dc (its cubic/ beside it, if run, is named too)."""
import csv
import os
import re
import sys

OPEN, CLOSE = "<!-- bench-table -->", "<!-- /bench-table -->"
GROUPS = ("pipe", "tee", "copy", "trees", "relay", "redis")


def load(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("bytes", "median_s", "gib_s", "cpu_s_per_gib", "ratio_vs_ref"):
            r[k] = float(r[k]) if r.get(k) not in (None, "") else None
    return rows


def head(results_md):
    """(date, machine, runs line) from a RESULTS.md written by bench/run."""
    text = open(results_md).read()
    get = lambda key: (re.search(rf"^- {key}: (.*)$", text, re.M) or [None, "?"])[1]
    return get("date"), get("machine"), get("size"), get("load average")


def rate(r):
    if r["group"] == "redis":
        return f"{r['bytes'] / r['median_s']:,.0f} req/s"
    if r["group"] == "trees":
        files = int(r["scenario"].split()[2].replace(",", ""))
        return f"{files / r['median_s']:,.0f} files/s"
    return f"{r['gib_s']:.2f} GiB/s"


def table(rows):
    L = ["| row | zerocat | peers (rate, ×: the peer's time over zerocat's, median of per-repetition ratios) "
         "| zerocat CPU s/GiB |", "|---|---:|---|---:|"]
    for scn in dict.fromkeys(r["scenario"] for r in rows if r["group"] in GROUPS):
        rs = [r for r in rows if r["scenario"] == scn and r["median_s"] is not None]
        if not rs:
            continue
        ref = next((r for r in rs if r["ratio_vs_ref"] == 1.0), rs[0])
        others = [r for r in rs if r is not ref and not r["tool"].startswith(("ceiling", "direct", "floor"))]
        peers = "; ".join(f"{r['tool']} {rate(r)} ({r['ratio_vs_ref']:.2f}×)" for r in others)
        path = f" ({ref['path']})" if ref.get("path") else ""
        tool = "" if ref["tool"] in ("zerocat", "zerocat -q") else f"`{ref['tool']}`: "
        cpu = f"{ref['cpu_s_per_gib']:.2f}" if ref["cpu_s_per_gib"] is not None and ref["group"] != "redis" else ""
        L.append(f"| {scn} | {tool}{rate(ref)}{path} | {peers} | {cpu} |")
    return L


def main():
    out = sys.argv[1]
    readme = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "README.md")
    rows = load(os.path.join(out, "results.csv"))
    date, machine, size, load_avg = head(os.path.join(out, "RESULTS.md"))
    block = [OPEN,
             f"One run of `bench/run` on {date}: {machine}. {size}. Load average {load_avg}. "
             "Every run's bytes checked. ×N above 1: zerocat was faster.", ""]
    block += table(rows)
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    run = os.path.relpath(os.path.join(os.path.abspath(out), "RESULTS.md"), root)
    where = f"This run's full tables, with the seed table of the relay by chunk size, are in `{run}`"
    if os.path.exists(os.path.join(out, "cubic", "RESULTS.md")):
        where += f"; its relay rows and seed table under TCP cubic in `{os.path.dirname(run)}/cubic/`"
    where += "; the measurements behind each decision in the code are in `bench/NOTEBOOK.md`."
    block += ["", where, CLOSE]
    for path in (readme, os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")):
        text = open(path).read()
        a, b = text.index(OPEN), text.index(CLOSE) + len(CLOSE)
        with open(path, "w") as f:
            f.write(text[:a] + "\n".join(block) + text[b:])


if __name__ == "__main__":
    main()
