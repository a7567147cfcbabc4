#!/usr/bin/env python3
"""A decode layer's critical chain, kernel by kernel, from a kernel timeline (real overlap).

  python3 dev/cuda/chain.py TIMELINE.csv [LAYER_START] [MARKER] [SKIP]

TIMELINE.csv: the CSV dev/cuda/kt_trace.c writes (or nsys's cuda_gpu_trace, as timeline.py reads).
Each step (between MARKER kernels, default scale_softcap_kernel; the first SKIP, default 4, left
out) is cut into layers at every second LAYER_START kernel (default add_rmsnorm: a Muse Glimmer
layer has two, the first after down). For each position in a layer it prints the kernel's
median start and end relative to the layer's first kernel end, and the median amount by which
its end moves the layer's frontier (the chain's increment; 0 for a kernel that ends under
another, as a side stream's does).
"""
import os
import statistics as st
import sys
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timeline  # noqa: E402  (its load(): (start, end, short name) sorted by start)


def layers_of(step, start_name):
    marks = [i for i, e in enumerate(step) if e[2].startswith(start_name)]
    marks = marks[1::2]   # every second: the norm after down starts the next layer's attention half
    return [step[a:b] for a, b in zip(marks, marks[1:])]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    start_name = sys.argv[2] if len(sys.argv) > 2 else "add_rmsnorm"
    marker = sys.argv[3] if len(sys.argv) > 3 else "scale_softcap_kernel"
    skip = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    ev = timeline.load(sys.argv[1])
    ends = [i for i, e in enumerate(ev) if e[2] == marker]
    if len(ends) < skip + 2:
        sys.exit(f"only {len(ends)} '{marker}' kernels in the trace")
    names, rel_s, rel_e, inc = defaultdict(Counter), defaultdict(list), defaultdict(list), defaultdict(list)
    n_layers = 0
    for t in range(skip, len(ends) - 1):
        for layer in layers_of(ev[ends[t] + 1:ends[t + 1] + 1], start_name):
            t0 = layer[0][1]
            frontier = layer[0][1]
            for pos, (s, e, n) in enumerate(layer[1:]):
                names[pos][n] += 1
                rel_s[pos].append((s - t0) / 1e3)
                rel_e[pos].append((e - t0) / 1e3)
                inc[pos].append(max(0.0, e - frontier) / 1e3)
                frontier = max(frontier, e)
            n_layers += 1
    if not n_layers:
        sys.exit(f"no layers: is '{start_name}' the name of the layer's norm kernel?")
    print(f"{n_layers} layers; us from the end of the layer's first {start_name}")
    print(f"{'pos':>3s} {'kernel':50s} {'start':>7s} {'end':>7s} {'chain +':>8s}")
    total = 0.0
    for pos in sorted(names):
        name, seen = names[pos].most_common(1)[0]
        if seen < n_layers / 2:   # positions that only some layers have
            continue
        d = st.median(inc[pos])
        total += d
        print(f"{pos:3d} {name[:50]:50s} {st.median(rel_s[pos]):7.2f} {st.median(rel_e[pos]):7.2f} {d:8.2f}")
    print(f"{'':3s} {'chain':50s} {'':7s} {'':7s} {total:8.2f}")


if __name__ == "__main__":
    main()
