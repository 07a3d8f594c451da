#!/usr/bin/env python3
"""Where a replayed CUDA graph's time goes, from kernel_trace.cpp's records.

  python3 bench/gpu/kernel_trace.py TRACE.tsv [--skip N]

Takes the graph with the most kernel records (a decode benchmark's step), cuts its records
into replays (a replay starts where the graph's first node comes round again), drops the
first N replays (warm-up; default 8) and prints, per node of the step in launch order, the
median of:
  own   end - max(start, previous kernel's end): the time this kernel adds to the step once
        its predecessor is done (the step's span is the sum of these and the gaps);
  gap   start - previous end (negative: it started early, under programmatic dependent launch);
  dur   end - start (includes, under such a launch, the time spent waiting for the predecessor).
Then the same summed per kernel name, and the step's median span. When the trace has the
host's records (RLX_KERNEL_TRACE_HOST=1), the time between replays: per step, what the host
did from one replay's last kernel's end to the next replay's first kernel's start (runtime
calls and copies, their medians; the rest is the host's own work).
"""
import statistics
import sys
from collections import defaultdict


def load(path):
    """(kernels, host records): each (start, end, graph_id, node, grid|bytes, block|kind, regs, name)."""
    rows, host = [], []
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) < 9:
                continue
            r = (int(p[1]), int(p[2]), int(p[3]), int(p[4]), int(p[5]), int(p[6]), int(p[7]), p[8])
            (rows if p[0] == "k" else host).append(r if p[0] != "m" else r[:7] + (f"copy kind {r[5]} {r[4]} B",))
    return rows, host


def between_replays(replays, host):
    """Median time per host record name between consecutive replays."""
    host = sorted(host)
    per = defaultdict(list)
    gaps = []
    for a, b in zip(replays, replays[1:]):
        lo, hi = a[-1][1], b[0][0]
        if hi - lo > 1e6:  # not consecutive steps
            continue
        gaps.append(hi - lo)
        seen = defaultdict(int)
        for r in host:
            if r[0] >= hi:
                break
            if r[1] > lo:
                seen[r[7]] += min(r[1], hi) - max(r[0], lo)
        for k, v in seen.items():
            per[k].append(v)
    return gaps, per


def short(name):
    name = name.replace("(anonymous namespace)::", "")
    if name.startswith("void "):
        name = name[5:]
    base = name.split("(")[0]
    targs = "<" + base.split("<", 1)[1] if "<" in base else ""
    return base.split("<")[0].split("::")[-1] + targs


def main():
    args = sys.argv[1:]
    skip = 8
    if "--skip" in args:
        i = args.index("--skip")
        skip = int(args[i + 1])
        del args[i : i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    rows, host = load(args[0])
    by_graph = defaultdict(list)
    for r in rows:
        if r[2]:
            by_graph[r[2]].append(r)
    if not by_graph:
        sys.exit("no kernel launched from a CUDA graph in " + args[0])
    gid, recs = max(by_graph.items(), key=lambda kv: len(kv[1]))
    recs.sort()
    first_node = recs[0][3]
    replays, cur = [], []
    for r in recs:
        if r[3] == first_node and cur:
            replays.append(cur)
            cur = []
        cur.append(r)
    if cur:
        replays.append(cur)
    n = len(replays[0])
    replays = [s for s in replays[skip:] if len(s) == n]
    if not replays:
        sys.exit(f"graph {gid}: fewer than {skip + 1} whole replays")
    own, gap, dur = defaultdict(list), defaultdict(list), defaultdict(list)
    spans = []
    last_end = None
    for s in replays:
        spans.append(s[-1][1] - s[0][0])
        prev_end = last_end if last_end is not None and s[0][0] - last_end < 1e6 else None
        for i, r in enumerate(s):
            start, end = r[0], r[1]
            own[i].append(end - max(start, prev_end) if prev_end is not None else end - start)
            gap[i].append(start - prev_end if prev_end is not None else 0)
            dur[i].append(end - start)
            prev_end = max(end, prev_end or 0)
        last_end = prev_end
    med = statistics.median
    span = med(spans)
    print(f"graph {gid}: {len(replays)} replays of {n} kernels; median span {span / 1e3:.1f} us")
    print(f"{'#':>4} {'own us':>8} {'gap us':>8} {'dur us':>8} {'grid':>6} {'blk':>4} {'reg':>4}  kernel")
    names = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    s0 = replays[0]
    for i in range(n):
        r = s0[i]
        o, g, d = med(own[i]) / 1e3, med(gap[i]) / 1e3, med(dur[i]) / 1e3
        nm = short(r[7])
        print(f"{i:>4} {o:8.2f} {g:8.2f} {d:8.2f} {r[4]:>6} {r[5]:>4} {r[6]:>4}  {nm}")
        e = names[nm]
        e[0] += 1
        e[1] += o
        e[2] += max(g, 0.0)
        e[3] += d
    print(f"\nper kernel name (per step): count, own us, idle gaps us, dur us; span {span / 1e3:.1f} us")
    for nm, e in sorted(names.items(), key=lambda kv: -kv[1][1]):
        print(f"{e[0]:>5} {e[1]:9.1f} {e[2]:9.1f} {e[3]:9.1f}  {nm}")
    tot_own = sum(e[1] for e in names.values())
    tot_gap = sum(e[2] for e in names.values())
    print(f"{n:>5} {tot_own:9.1f} {tot_gap:9.1f}            (sum)")
    if host:
        gaps, per = between_replays(replays, host)
        if gaps:
            print(f"\nbetween replays: median {med(gaps) / 1e3:.1f} us over {len(gaps)} gaps; host records in them"
                  " (median us a gap, gaps with it):")
            for k, v in sorted(per.items(), key=lambda kv: -med(kv[1])):
                print(f"{med(v) / 1e3:9.2f} {len(v):>5}  {k}")


if __name__ == "__main__":
    main()
