#!/usr/bin/env python3
"""v5_trace_sum.py TRACE — the v5 trace's launches (cuda_v5_trace_dump lines) grouped by size:
per size the launches, and the medians of TB/s, of the span (first wait end to last warp end),
of the gap to the previous launch's last end, and of the head start (first warp entry to first
wait end: how long its first loads had before its predecessor ended). Diagnosis only."""
import statistics
import sys

rows = {}
for line in open(sys.argv[1]):
    if not line.startswith("v5 trace:") or "launch" in line:
        continue
    f = line.split("|")
    head, waits, ends = f[0].split(), f[1].split(), f[2].split()
    mb = float(head[4])
    rows.setdefault(mb, []).append((float(f[3]), float(ends[3]) - float(waits[1]), float(f[4]),
                                    float(waits[1]) - float(waits[0])))
for mb in sorted(rows):
    r = rows[mb]
    med = lambda i: statistics.median(x[i] for x in r)
    print(f"  {mb:8.2f} MB: {len(r):3d} launches, TB/s {med(0):.2f}, span {med(1):.2f} us, gap {med(2):.2f} us, "
          f"head start {med(3):.2f} us")
