#!/bin/bash
# dev/gpu_s9.sh — one batched device call (repo root on the GPU machine):
#   bash dev/gpu_s9.sh [build] [test] [testq] [kern] [prof] [e2e] [tl] [brk] [depth] 2>&1 | tee $OUT/log
# build: CUDA build of everything; test: test_cuda_ops + GPU goldens (also with the pre-2026-12-03
# defaults GLIM_CUDA_PDL=1 GLIM_CUDA_GEMV_PERSIST=0); testq: only the GEMV tests + goldens; kern: GEMV
# benches (default, plain v3 at 1/2 rows per warp); prof: ncu of the GEMVs (PROF: versions); attn: the
# attention bench; e2e: the 30B preset end to end (pp512/pp4096, tg128 with/without graphs and each
# path switched off/on); tl: nsys timeline of decode tokens, each kernel's exposed time and the idle
# gaps (dev/cuda/timeline.py; TL: extra env configs); brk: ncu per-kernel time of a decode token (dev/cuda/kernel_breakdown.py;
# BRK: extra env configs); depth: tg at 4096/32768/131072 with GPU memory sampled.
# Steps are time-boxed; a summary is printed last.
set -u; PROFENV=${PROFENV:-X=1}
ARGS=" $* "; want() { case "$ARGS" in *" $1 "*) return 0;; esac; return 1; }
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=${OUT:-/tmp/out}; mkdir -p $O
B=./build-gpu/glim; M=/tmp/m30.gguf
SUM=/tmp/summary.txt; : >$SUM
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used,memory.total --format=csv,noheader
if want build || [ ! -x $B ]; then
  cmake -S . -B build-gpu -DGLIM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
        -DGLIM_TESTDATA=$PWD/.gpu/testdata >/tmp/cfg.log 2>&1 && cmake --build build-gpu -j16 >/tmp/build.log 2>&1 \
    || { echo BUILD FAILED; grep -E "error" /tmp/build.log | head -20; cp /tmp/build.log $O/; exit 1; }
  el "build ok"
fi
if [ ! -s $M ] && (want e2e || want tl || want brk || want depth || want kern || want mk); then
  # 256 distinct rows per matrix, repeated: the same bytes per token, written in seconds
  ( $B mkmodel --preset muse-glimmer-30b --vocab 202048 --unique-rows 256 -q -o $M >/tmp/mk.log 2>&1; echo "mk rc=$?" >>/tmp/mk.log ) &
  MK=$!
else MK=""; fi
if want test; then
  timeout 300 ./build-gpu/tests/test_cuda_ops >/tmp/ops.log 2>&1; echo "test_cuda_ops rc=$?" | tee -a $SUM
  grep -E "FAIL|checks|worst|^  " /tmp/ops.log | head -40; cp /tmp/ops.log $O/
  timeout 200 ./build-gpu/tests/test_golden_gpu >/tmp/gold.log 2>&1; echo "test_golden_gpu rc=$?" | tee -a $SUM
  grep -E "FAIL|ok$|checks|maxabs|dflash" /tmp/gold.log | tail -25; cp /tmp/gold.log $O/
  # the previous defaults (PDL of the GEMVs only, plain v3) stay selectable: keep them tested
  GLIM_CUDA_PDL=1 GLIM_CUDA_GEMV_PERSIST=0 timeout 300 ./build-gpu/tests/test_cuda_ops >/tmp/ops2.log 2>&1; echo "test_cuda_ops PDL=1 PERSIST=0 rc=$?" | tee -a $SUM
  GLIM_CUDA_PDL=1 GLIM_CUDA_GEMV_PERSIST=0 timeout 200 ./build-gpu/tests/test_golden_gpu >/tmp/gold2.log 2>&1; echo "test_golden_gpu PDL=1 PERSIST=0 rc=$?" | tee -a $SUM
  grep -E "FAIL" /tmp/ops2.log /tmp/gold2.log | head; cp /tmp/ops2.log /tmp/gold2.log $O/
  el "tests done"
fi
if want testq; then   # the GEMV tests only, and the goldens
  for t in test_gemv_v3 test_matmul_n test_gemv_v5; do GLIM_TEST_ONLY=$t timeout 200 ./build-gpu/tests/test_cuda_ops 2>&1 | tail -3; done | tee /tmp/opsq.log
  grep -q "0 failed" /tmp/opsq.log && ! grep -q FAIL /tmp/opsq.log; echo "test_cuda_ops gemv rc=$?" | tee -a $SUM
  timeout 200 ./build-gpu/tests/test_golden_gpu >/tmp/goldq.log 2>&1; echo "test_golden_gpu rc=$?" | tee -a $SUM
  GLIM_CUDA_GEMV=5 timeout 200 ./build-gpu/tests/test_golden_gpu >/tmp/goldq5.log 2>&1; echo "test_golden_gpu GEMV=5 rc=$?" | tee -a $SUM
  cp /tmp/opsq.log /tmp/goldq.log /tmp/goldq5.log $O/; el "quick tests done"
fi
if want kern; then
  cc -O2 -std=gnu11 -Iinclude -Isrc dev/cuda/gemv_bench.c build-gpu/src/libglim.a /usr/local/cuda/lib64/libcudart_static.a \
     -L/usr/local/cuda/lib64 -lcublas -lstdc++ -lpthread -lm -ldl -lrt -o /tmp/gemv_bench || echo "gemv_bench build failed"
  echo "== GEMV default (persistent v3 on sm_90)" > /tmp/gemv.log
  timeout 100 /tmp/gemv_bench quick 2>&1 | grep -E "rows=1 |copy" | head -30 >> /tmp/gemv.log
  echo "== GEMV v5 (tensor cores, Q4_K and Q6_K)" >> /tmp/gemv.log
  GLIM_CUDA_GEMV=5 timeout 100 /tmp/gemv_bench quick 2>&1 | grep -E "rows=1 " >> /tmp/gemv.log
  echo "== GEMV v5, 3 super-blocks in flight per lane" >> /tmp/gemv.log
  GLIM_CUDA_GEMV=5 GLIM_CUDA_V5_U=3 timeout 100 /tmp/gemv_bench quick 2>&1 | grep -E "rows=1 " | head -7 >> /tmp/gemv.log
  for kc in ${V5KC:-2 4 8 80}; do   # split-K chunk size (80: no split for K <= 20480)
    echo "== GEMV v5 GLIM_CUDA_V5_KC=$kc" >> /tmp/gemv.log
    GLIM_CUDA_GEMV=5 GLIM_CUDA_V5_KC=$kc timeout 100 /tmp/gemv_bench quick 2>&1 | grep -E "rows=1 " | head -7 >> /tmp/gemv.log
  done
  # v3's wave tail: 6656 rows at 2 rows per warp are 1.58 waves of 4 CTAs per SM (K = 19968)
  for rw in 1 2; do echo "== GEMV v3 GLIM_CUDA_GEMV_RW=$rw"; GLIM_CUDA_GEMV_PERSIST=0 GLIM_CUDA_GEMV=3 GLIM_CUDA_GEMV_RW=$rw timeout 60 /tmp/gemv_bench quick 2>&1 | grep -E "rows=1 " | head -7; done >> /tmp/gemv.log
  cat /tmp/gemv.log; cp /tmp/gemv.log $O/
  el "gemv bench done"
fi
if want kern5; then   # v5 variants: T16 = the 16-row tile layout's traffic (raw buffers read as tiled: wrong values), PIPE = 2 register sets
  cc -O2 -std=gnu11 -Iinclude -Isrc dev/cuda/gemv_bench.c build-gpu/src/libglim.a \
     /usr/local/cuda/lib64/libcudart_static.a -L/usr/local/cuda/lib64 -lcublas -lstdc++ -lpthread -lm -ldl -lrt -o /tmp/gemv_bench
  : >/tmp/gemv5.log
  for cfg in X=1 GLIM_CUDA_GEMV=5 GLIM_CUDA_GEMV=5,GLIM_CUDA_V5_PIPE=1 ${K5:-GLIM_CUDA_GEMV=5,GLIM_CUDA_V5_T16=1 \
      GLIM_CUDA_GEMV=5,GLIM_CUDA_V5_T16=1,GLIM_CUDA_V5_PIPE=1 GLIM_CUDA_GEMV=5,GLIM_CUDA_V5_T16=1,GLIM_CUDA_V5_U=3 \
      GLIM_CUDA_GEMV=5,GLIM_CUDA_V5_T16=1,GLIM_CUDA_V5_U=1 GLIM_CUDA_GEMV=5,GLIM_CUDA_V5_T16=1,GLIM_CUDA_V5_KC=80 \
      GLIM_CUDA_GEMV=5,GLIM_CUDA_V5_T16=1,GLIM_CUDA_V5_PIPE=1,GLIM_CUDA_V5_KC=80 GLIM_CUDA_GEMV=5,GLIM_CUDA_V5_T16=1,GLIM_CUDA_V5_PIPE=1,GLIM_CUDA_V5_KC=13 \
      GLIM_CUDA_GEMV=5,GLIM_CUDA_V5_T16=1,GLIM_CUDA_V5_KC=4 GLIM_CUDA_GEMV=5,GLIM_CUDA_V5_T16=1,GLIM_CUDA_V5_PIPE=1,GLIM_CUDA_V5_KC=6}; do
    echo "== $cfg" >> /tmp/gemv5.log
    env ${cfg//,/ } timeout 60 /tmp/gemv_bench quick 2>&1 | grep -E "rows=1 " | head -7 >> /tmp/gemv5.log
  done
  cat /tmp/gemv5.log; cp /tmp/gemv5.log $O/
  el "gemv v5 variants done"
fi
if want prof; then   # stall reasons and throughputs of the GEMVs (PROF: versions)
  cc -O2 -std=gnu11 -Iinclude -Isrc dev/cuda/gemv_bench.c build-gpu/src/libglim.a \
     /usr/local/cuda/lib64/libcudart_static.a -L/usr/local/cuda/lib64 -lcublas -lstdc++ -lpthread -lm -ldl -lrt -o /tmp/gemv_bench
  for v in ${PROF:-3}; do   # 3 = the default persistent kernel (gemv3p) on sm_90; PROF="3 5" adds v5
    env GLIM_CUDA_GEMV=$v ${PROFENV//,/ } timeout 120 ncu --clock-control none --kernel-name regex:'gemv(3p|5|5s)_kernel' --launch-skip 20 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
      --section SchedulerStats --section InstructionStats --section ComputeWorkloadAnalysis \
      --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
      /tmp/gemv_bench quick >/tmp/ncu$v.log 2>&1; echo "ncu v$v rc=$?"; cp /tmp/ncu$v.log $O/
    grep -E "gemv|Throughput|Issue|Eligible|Active Warps|Warp Cycles|Registers|Executed Ipc|Achieved|stalled" /tmp/ncu$v.log | awk '$NF != "0" && $NF != "0.00"' | head -60
  done
  el "profile done"
fi
if want attn; then
  if [ -f dev/cuda/attn_bench.c ]; then
    cc -O2 -std=gnu11 -Iinclude -Isrc dev/cuda/attn_bench.c build-gpu/src/libglim.a /usr/local/cuda/lib64/libcudart_static.a \
       -L/usr/local/cuda/lib64 -lcublas -lstdc++ -lpthread -lm -ldl -lrt -o /tmp/attn_bench && timeout 150 /tmp/attn_bench 2>&1 | tee /tmp/attn.log | tail -40
    cp /tmp/attn.log $O/ 2>/dev/null
  fi
  el "attention bench done"
fi
[ -n "$MK" ] && { wait $MK; tail -2 /tmp/mk.log; el "model written"; }
tg() {  # tg <label> <env...> -- bench args
  local label=$1; shift
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local out; out=$(env "${envs[@]}" timeout 150 $B bench -m $M --device cuda "$@" 2>&1)
  echo "$out" | grep -E "^\| |GPU|t/s x" | grep -v -- "---" | sed "s/^/$label: /" | tee -a $SUM
}
if want e2e; then   # defaults on sm_90 since 2026-12-03: persistent v3 (4 CTAs/SM) + PDL of every decode kernel
  # SM clock and power while decoding: is the issue-bound Q4_K decode running at full boost?
  ( while sleep 0.2; do nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv,noheader,nounits; done ) >/tmp/clk.log &
  CP=$!
  tg default-tg X=1 -- -p 0 -n 256 -r 3
  kill $CP; sort -t, -k1 -n /tmp/clk.log | awk -F, '$4 > 50 {n++; c+=$1; p+=$3; if ($1 > m) m = $1} END {if (n) printf "decode: SM clock mean %.0f MHz (max %d), power mean %.0f W over %d samples\n", c/n, m, p/n, n}' | tee -a $SUM
  tg default X=1 -- -p 512,4096 -n 128 -r 3
  tg no-graph X=1 -- -p 0 -n 128 -r 2 --no-graph
  tg no-pdl GLIM_CUDA_PDL=0 -- -p 0 -n 128 -r 2
  for cfg in ${E2E:-}; do tg "$cfg" ${cfg//,/ } -- -p 0 -n 128 -r 2; done   # E2E: more configs, VAR=value,...
  tg gemv5 GLIM_CUDA_GEMV=5 -- -p 0 -n 128 -r 3     # tensor-core GEMV for the Q4_K jobs
  tg gemv5-no-graph GLIM_CUDA_GEMV=5 -- -p 0 -n 128 -r 2 --no-graph
  tg gemv5-u3 GLIM_CUDA_GEMV=5 GLIM_CUDA_V5_U=3 -- -p 0 -n 128 -r 2
  tg gemv5-q4k GLIM_CUDA_GEMV=5 GLIM_CUDA_V5_KINDS=1 -- -p 0 -n 128 -r 2   # Q6_K stays on v3
  tg gemv5-q6k GLIM_CUDA_GEMV=5 GLIM_CUDA_V5_KINDS=2 -- -p 0 -n 128 -r 2   # Q4_K stays on v3
  tg rw1 GLIM_CUDA_GEMV_RW=1 -- -p 0 -n 128 -r 2   # rows per warp forced for every Q4_K part
  tg rw2 GLIM_CUDA_GEMV_RW=2 -- -p 0 -n 128 -r 2
  el "e2e done"
fi
if want tl; then   # nsys: real overlap (graphs, PDL); TL: more configs, each comma-separated VAR=value
  NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
  if [ -z "$NSYS" ]; then echo "tl: no nsys on this machine"; else
    for cfg in X=1 ${TL:-}; do
      env ${cfg//,/ } timeout 120 $NSYS profile -t cuda --cuda-graph-trace=node -o /tmp/tl -f true $B bench -m $M \
        --device cuda -p 0 -n 48 -r 1 >/tmp/tl.out 2>&1; echo "nsys $cfg rc=$?"
      timeout 120 $NSYS stats -r cuda_gpu_trace -f csv -o /tmp/tl /tmp/tl.nsys-rep >/dev/null 2>&1
      echo "== timeline $cfg"; python3 dev/cuda/timeline.py /tmp/tl_cuda_gpu_trace.csv 2>&1 | head -30
      cp /tmp/tl_cuda_gpu_trace.csv "$O/tl-${cfg//[=,]/_}.csv" 2>/dev/null
    done 2>&1 | tee /tmp/tl.log; cp /tmp/tl.log $O/
  fi
  el "timeline done"
fi
if want brk; then   # per-kernel time of one decode token (ncu, kernels serialized: no PDL overlap)
  for cfg in X=1 ${BRK:-}; do   # BRK: more configs, each comma-separated VAR=value
    env ${cfg//,/ } timeout 240 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --page raw $B bench -m $M --device cuda \
      -p 0 -n 2 -r 1 --no-graph >/tmp/brk.csv 2>/tmp/brk.err; echo "ncu $cfg rc=$?"
    echo "== breakdown $cfg (3 decode tokens: 1 warm-up + 2)"; python3 dev/cuda/kernel_breakdown.py /tmp/brk.csv 3 | head -40
    cp /tmp/brk.csv "$O/brk-${cfg//[=,]/_}.csv"
  done 2>&1 | tee /tmp/brk.log; cp /tmp/brk.log $O/
  el "breakdown done"
fi
if want depth; then
  tg depth X=1 -- -p 0 -n 128 -d 4096,32768 -r 1
  tg depth-v2attn GLIM_CUDA_ATTN_DEC_TC=0 -- -p 0 -n 128 -d 32768 -r 1
  ( while sleep 0.5; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits; done ) >/tmp/mem.log &
  MP=$!
  S=$(date +%s)
  tg d131072 X=1 -- -p 0 -n 128 -d 131072 -r 1
  kill $MP; echo "d131072 run took $(( $(date +%s) - S )) s; GPU memory used max (MiB): $(sort -n /tmp/mem.log | tail -1)" | tee -a $SUM
  el "depth done"
fi
echo "==== summary"; cat $SUM; el "end"
