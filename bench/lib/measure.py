"""What runs and how rows come out of it: a scenario is a group, a name, a byte count and
its contenders; measure() runs each contender (warm-up, then `runs` rounds in a rotating
order) and summarises the times into one row per contender."""
import shutil
import statistics

from .common import Failed, GiB


def contender(label, kind, fn, needs=()):
    """kind: zerocat, peer or ceiling; fn runs once and returns procs.result(); needs:
    zerocat subcommands or peer commands, without which the row is skipped."""
    return {"label": label, "kind": kind, "fn": fn, "needs": needs}


def scenario(group, name, nbytes, contenders, ref="zerocat", files=0):
    """ref: the contender the others' times are divided by; files: for a files/s note."""
    return {"group": group, "name": name, "bytes": nbytes, "contenders": contenders, "ref": ref, "files": files}


def skip_reason(c, have):
    for need in c["needs"]:
        if need in have and not have[need]:
            return f"skipped: zerocat has no {need} yet"
        if need not in have and not shutil.which(need):
            return f"skipped: {need} not installed"
    return None


def measure(scn, have, runs, warmup):
    rows = []
    for c in scn["contenders"]:
        rows.append({"scenario": scn["name"], "group": scn["group"], "tool": c["label"], "kind": c["kind"],
                     "bytes": scn["bytes"], "files": scn["files"], "requests": scn.get("requests", False), "runs": [], "error": None, "skip": skip_reason(c, have), "fn": c["fn"]})
    live = [r for r in rows if not r["skip"]]
    for i in range(-1 if warmup else 0, runs):
        k = max(i, 0) % max(len(live), 1)
        for r in live[k:] + live[:k]:  # rotate the order each repetition
            if r["error"]:
                continue
            try:
                res = r["fn"]()
            except Failed as e:
                r["error"] = str(e)
                continue
            if i >= 0:
                r["runs"].append(res)
    ref = next((r for r in rows if r["tool"] == scn["ref"]), None)
    for r in rows:
        summarize(r, ref)
    return rows


def summarize(r, ref):
    runs = r["runs"]
    r.update(median=None, lo=None, hi=None, cpu=None, ratio=None, path="")
    if not runs or r["error"]:
        return
    t = [x["seconds"] for x in runs]
    r["median"], r["lo"], r["hi"] = statistics.median(t), min(t), max(t)
    cpus = [x["cpu"] for x in runs if x["cpu"] is not None]
    if cpus:
        r["cpu"] = statistics.median(cpus) / (r["bytes"] / GiB)
    r["path"] = runs[-1]["path"]
    rss = [x["rss_kib"] for x in runs if x.get("rss_kib")]
    if rss:
        r["rss_kib"] = max(rss)
    noted = [x for x in runs if x.get("note")]
    if noted:  # the note of the run nearest the median (udp: its delivered rate and loss)
        r["note"] = min(noted, key=lambda x: abs(x["seconds"] - r["median"]))["note"]
    if r.get("files"):
        r["note"] = f"{r['files'] / r['median']:,.0f} files/s"
    if ref is not None and ref["runs"] and not ref["error"] and len(ref["runs"]) == len(runs):
        r["ratio"] = statistics.median(a["seconds"] / b["seconds"] for a, b in zip(runs, ref["runs"]))
