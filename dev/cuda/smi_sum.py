#!/usr/bin/env python3
"""smi_sum.py LOG LABEL — nvidia-smi samples (clocks.sm, clocks.mem, power.draw, power.limit,
temperature.gpu, clocks_throttle_reasons.active; csv, no header) taken during a bench run: the
samples under load (power above the median), their SM clock min/median/max, memory clock, power
and the throttle-reason masks seen. Diagnosis only."""
import collections
import statistics
import sys

rows = []
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.split(",")]
    try:
        rows.append((float(f[0]), float(f[1]), float(f[2]), float(f[3]), float(f[4]), f[5]))
    except (ValueError, IndexError):
        continue
if not rows:
    print(f"{sys.argv[2]}: smi: no samples")
    sys.exit(0)
cut = statistics.median(r[2] for r in rows)
busy = [r for r in rows if r[2] >= cut]
sm = sorted(r[0] for r in busy)
reasons = collections.Counter(r[5] for r in busy)
print(f"{sys.argv[2]}: smi {len(busy)}/{len(rows)} samples under load: SM MHz {sm[0]:.0f}/{statistics.median(sm):.0f}/{sm[-1]:.0f} "
      f"(min/median/max), mem MHz {statistics.median(r[1] for r in busy):.0f}, power W median {statistics.median(r[2] for r in busy):.0f} "
      f"max {max(r[2] for r in busy):.0f} of {busy[0][3]:.0f}, temp {max(r[4] for r in busy):.0f} C, throttle {dict(reasons)}")
