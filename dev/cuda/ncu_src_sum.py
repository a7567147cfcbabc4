#!/usr/bin/env python3
"""ncu_src_sum.py CSV [N] — the SASS lines of `ncu --import R --page source --print-source sass --csv`
with the most warp stall samples: the share of all samples, then the columns of stall reasons
that are not zero. A diagnosis aid (dev/gpu_bench.sh NCUSRC); prints, never asserts."""
import csv, sys

rows = list(csv.reader(open(sys.argv[1], newline='', errors='replace')))
n = int(sys.argv[2]) if len(sys.argv) > 2 else 40
hi = next((i for i, r in enumerate(rows) if any('Warp Stall Sampling (All' in c for c in r)), None)
if hi is None:
    print('ncu_src_sum: no "Warp Stall Sampling (All Samples)" column; header:', rows[:2])
    sys.exit(0)
head = rows[hi]
col = next(i for i, c in enumerate(head) if 'Warp Stall Sampling (All' in c)
src = next((i for i, c in enumerate(head) if c.strip() in ('Source', 'Sass', 'SASS')), 1)
adr = next((i for i, c in enumerate(head) if c.strip() == 'Address'), 0)
num = lambda s: float(s.replace(',', '')) if s.replace(',', '').replace('.', '', 1).isdigit() else 0.0
body = [r for r in rows[hi + 1:] if len(r) > col]
tot = sum(num(r[col]) for r in body) or 1.0
print('ncu_src_sum: %d SASS lines, %.0f stall samples; top %d:' % (len(body), tot, n))
for r in sorted(body, key=lambda r: -num(r[col]))[:n]:
    print('%6.2f%%  %-8s %s' % (100 * num(r[col]) / tot, r[adr][-6:], r[src].strip()[:90]))
