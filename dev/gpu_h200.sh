#!/bin/bash
# dev/gpu_h200.sh — the questions only an H200 answers, in one device call. On any other card it
# says so and exits 0 at once, so a session can ask for `nvidia-h200` and pay only the machine's
# start when an H100 comes (they came for every call of 2026-12-06).
#
# WHY (docs/CUDA.md "What limits it now", twenty-first and twenty-second sessions): on an H100,
# GEMV v5's register loads already stream the FFN at ~94% of copy bandwidth, so nothing measured
# there says whether a shared-memory ring fed by bulk copies (the persistent span,
# GLIM_CUDA_MEGA=1) streams faster than v5 on the H200's faster HBM. The model of 2026-12-04 said
# 4.66 against 3.74 TB/s with synthetic consumers. The span has never run on an H200.
#
# Run from the repository root (or a `git archive` snapshot's), with .gpu/testdata carried (docs/PERFORMANCE.md):
#   OUT=$OUT bash dev/gpu_h200.sh > $OUT/h200.log 2>&1; tail -80 $OUT/h200.log
# It runs, in order (~480 s on an H200; QUICK=1: only test_mega, the default, the span at depths 1
# and 2, without graphs, and its trace, then the two models, ~170 s; FIG=1 adds the figures):
#   1. dev/gpu_bench.sh:
#      - goldens and test_mega;
#      - the default with and without graphs;
#      - the GEMVs alone;
#      - the span at depth 1 (its default) and 2, with and without graphs;
#      - the span's stage trace, and the trace by SM;
#      - with FIG=1, the other figures (copy bandwidth, pp4096, depths 4096 / 32768 / 131072,
#        GPU memory at 131072);
#   2. dev/cuda/mega_model.cu, 16 consumer warps, with synthetic and with v5's own Q4_K arithmetic
#      (variant 4): does the ring keep its rate with real consumers;
#   3. dev/cuda/sweep_probe.cu: v5's load shape alone (no arithmetic), 150 MB and 1100 MB.
set -u
N=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
echo "card: ${N:-none}"
case "$N" in
  *H200*) ;;
  *) [ -n "${FORCE:-}" ] || { echo "not an H200: nothing run (FORCE=1 runs it anyway)"; exit 0; } ;;
esac
O=${OUT:-/tmp/out}; mkdir -p "$O"
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
M1=GLIM_CUDA_MEGA=1
# v5s (the H100's default, opt-in on an H200 since a678cf7) against plain v5
V5="GLIM_CUDA_V5S=4"
if [ -n "${QUICK:-}" ]; then   # QUICK=1: the default and the span only (~170 s), for a short budget
  L=(GOLD=" " TESTS="test_mega" SKIPS=" " EXTRA="$M1 $M1,GLIM_CUDA_MEGA_DEPTH=2" NGEXTRA="$M1" MTRACE="X=1")
else
  L=(GOLD="X=1" TESTS="test_mega test_v5s" SKIPS="15" EXTRA="$V5 $M1 $M1,GLIM_CUDA_MEGA_DEPTH=2 $M1" NGEXTRA="$M1" MTRACE="X=1" ${FIG:+DEPTH=1})
fi
env "${L[@]}" OUT=$O BD=${BD:-/tmp/bg} TG_TIMEOUT=${TG_TIMEOUT:-60} bash dev/gpu_bench.sh
el "bench"
nvcc -arch=sm_90 -O3 -DCW=16 -Iinclude -Isrc -o /tmp/mm16 dev/cuda/mega_model.cu && \
  timeout 90 /tmp/mm16 36,5,5,36,3 36,5,5,36,7 2>&1 | tee "$O/mega_model.txt" | tail -12
el "mega model"
nvcc -arch=sm_90 -O3 -o /tmp/sweep_probe dev/cuda/sweep_probe.cu && timeout 90 /tmp/sweep_probe 2>&1 | tee "$O/sweep_probe.txt" | tail -12
el "sweep probe"
el "h200 battery done"
