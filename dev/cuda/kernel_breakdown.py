#!/usr/bin/env python3
"""Per-token kernel time breakdown of a decode run profiled by ncu.

  ncu --metrics gpu__time_duration.sum --csv --page raw -o- glim bench ... -p 0 -n N --no-graph > ncu.csv
  python3 dev/cuda/kernel_breakdown.py ncu.csv TOKENS

TOKENS = decode steps in the run (bench: 1 warm-up + N). Kernels that also ran at load time
(repacks) are listed too; their share per token is meaningless and they are marked.
Prints per kernel name: launches per token, us per token, share; then the sum.
"""
import csv
import sys
from collections import defaultdict

UNIT = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6, "ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def short(name):
    """the kernel's name without its parameter list (template arguments may hold parentheses)"""
    name = name.strip()
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            return name[:i].strip()
    return name


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = list(csv.reader(open(sys.argv[1], newline="")))
    hdr = next(i for i, r in enumerate(rows) if "Kernel Name" in r and "gpu__time_duration.sum" in r)
    cols = rows[hdr]
    k_name, k_time = cols.index("Kernel Name"), cols.index("gpu__time_duration.sum")
    data = rows[hdr + 1:]
    scale = 1e-3
    if data and data[0][k_time] in UNIT:   # the units row
        scale = UNIT[data[0][k_time]]
        data = data[1:]
    tokens = int(sys.argv[2])
    tot, cnt = defaultdict(float), defaultdict(int)
    for r in data:
        if len(r) <= max(k_name, k_time) or not r[k_time]:
            continue
        name = short(r[k_name])
        tot[name] += float(r[k_time].replace(",", "")) * scale
        cnt[name] += 1
    all_us = sum(tot.values())
    print(f"{'kernel':60s} {'launches/tok':>12s} {'us/tok':>10s} {'share':>7s}")
    for name in sorted(tot, key=tot.get, reverse=True):
        per = cnt[name] / tokens
        odd = "" if abs(per - round(per)) < 1e-9 else "  (not a multiple of the tokens: also at load?)"
        print(f"{name[:60]:60s} {per:12.2f} {tot[name] / tokens:10.1f} {100 * tot[name] / all_us:6.1f}%{odd}")
    print(f"{'total':60s} {sum(cnt.values()) / tokens:12.2f} {all_us / tokens:10.1f}")


if __name__ == "__main__":
    main()
