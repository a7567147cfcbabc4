#!/usr/bin/env python3
"""Where a decode token's wall time goes, from an nsys kernel trace (real overlap: graphs, PDL).

  nsys profile -t cuda --cuda-graph-trace=node -o tl glim bench ... -p 0 -n 32 -r 1
  nsys stats -r cuda_gpu_trace -f csv -o tl tl.nsys-rep      # -> tl_cuda_gpu_trace.csv
  python3 dev/cuda/timeline.py tl_cuda_gpu_trace.csv [MARKER] [SKIP]

MARKER: a kernel launched once per token at its end (default scale_softcap_kernel); the tokens
between markers are measured, the first SKIP (default 4) left out as warm-up. The wall time of
each token is split exactly into, per kernel name: "exposed" time (how far the kernel's end
runs past every earlier kernel's end) and the idle "gap" before it (nothing running). A kernel
that overlaps its predecessor (PDL) is charged only for the part that sticks out.
"""
import csv
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_breakdown  # noqa: E402  (its short(): the name without the parameter list)


def short(name):
    """the kernel's name without parameter list and without a leading "void " """
    name = kernel_breakdown.short(name)
    return name[5:] if name.startswith("void ") else name


def load(path):
    rows = list(csv.reader(open(path, newline="")))
    hdr = next(i for i, r in enumerate(rows) if any(c.startswith("Start") for c in r) and "Name" in r)
    cols = rows[hdr]
    ks = next(i for i, c in enumerate(cols) if c.startswith("Start"))
    kd = next(i for i, c in enumerate(cols) if c.startswith("Duration"))
    kn = cols.index("Name")
    ev = []
    for r in rows[hdr + 1:]:
        if len(r) <= max(ks, kd, kn) or not r[ks]:
            continue
        if r[kn].startswith("[CUDA"):   # memcpy / memset rows
            continue
        s, d = float(r[ks].replace(",", "")), float(r[kd].replace(",", ""))
        ev.append((s, s + d, short(r[kn])))
    ev.sort()
    return ev


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    marker = sys.argv[2] if len(sys.argv) > 2 else "scale_softcap_kernel"
    skip = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    ev = load(sys.argv[1])
    ends = [i for i, e in enumerate(ev) if e[2] == marker]
    if len(ends) < skip + 2:
        sys.exit(f"only {len(ends)} '{marker}' kernels in the trace")
    exposed, gap, dur, cnt = defaultdict(float), defaultdict(float), defaultdict(float), defaultdict(int)
    walls = []
    for t in range(skip, len(ends) - 1):
        lo, hi = ends[t] + 1, ends[t + 1] + 1
        frontier = ev[ends[t]][1]
        t0 = frontier
        for s, e, n in ev[lo:hi]:
            if s > frontier:
                gap[n] += s - frontier
            if e > frontier:
                exposed[n] += e - max(s, frontier)
                frontier = e
            dur[n] += e - s
            cnt[n] += 1
        walls.append(frontier - t0)
    nt = len(walls)
    wall = sum(walls) / nt
    print(f"{nt} tokens, wall {wall / 1e3:.1f} us/token ({1e9 / wall:.1f} t/s), ns clock")
    print(f"{'kernel':48s} {'n/tok':>6s} {'mean us':>8s} {'sum us':>8s} {'exposed':>8s} {'gap':>7s} {'share':>6s}")
    for n in sorted(dur, key=lambda k: exposed[k] + gap[k], reverse=True):
        print(f"{n[:48]:48s} {cnt[n] / nt:6.1f} {dur[n] / cnt[n] / 1e3:8.2f} {dur[n] / nt / 1e3:8.1f} "
              f"{exposed[n] / nt / 1e3:8.1f} {gap[n] / nt / 1e3:7.1f} {100 * (exposed[n] + gap[n]) / nt / wall:5.1f}%")
    print(f"{'total':48s} {sum(cnt.values()) / nt:6.1f} {'':8s} {sum(dur.values()) / nt / 1e3:8.1f} "
          f"{sum(exposed.values()) / nt / 1e3:8.1f} {sum(gap.values()) / nt / 1e3:7.1f}")


if __name__ == "__main__":
    main()
