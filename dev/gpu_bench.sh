#!/bin/bash
# dev/gpu_bench.sh — one device call (repo root on the GPU machine): build the CLI, the GPU goldens
# and the op test; the goldens and chosen op tests; then the 30B preset (glim mkmodel): pp512/tg128
# by default with graphs, tg128 without, tg128 with kernels left out (GLIM_CUDA_DBG_SKIP bits:
# 1 attn_prep, 2 attention, 4 add_rmsnorm, 8 quantize_x, 16 the output gate's GEMV, 32 the gated Wo; wrong output, timing only; 15 = the
# GEMVs alone), tg128 under extra settings, and the default again (the spread between runs).
set -u
# GOLD (env per goldens run), TESTS (op tests; TENV: their env), SKIPS (" ": none), EXTRA (comma-joined env per tg run),
# NGEXTRA (the same without graphs), TRACE (v5 per-warp trace per env), TL (kernel timeline per env, CUPTI: dev/cuda/kt_trace.c), DEPTH (=1: membw, pp4096, depths, memory):
# UNITS (more test executables to build and run, e.g. "test_greedy"), GREEDY (=1: tg128 --greedy with and without graphs),
# HALF (=1: first, the attention-half model dev/cuda/half_model.cu, which needs no build of glim), SWEEPP / TAILP / FFNP (=1, or only: dev/cuda/sweep_probe.cu / tail_probe.cu / ffn_probe.cu first), SMRATE (=1: dev/cuda/sm_rate.cu first), CARVE (=1: dev/cuda/carve_probe.cu first),
# SMI (=1: clocks, power and throttle reasons during every tg run), KEEP_EXTRA (=1: run EXTRA, NGEXTRA and TRACE even when an op test failed), DEXTRA (tg64 at depth 32768 per env),
# LCMP (the 30B file's logits under each env against the default's, or LBASE's: identical, or how far), MTRACE (the span's stamps per env),
# STRACE (the short attention's stamps per env; X=1: the default), GEMVB (args of dev/cuda/gemv_bench.c, run after the tests, e.g. "two"),
# NCU ("env,env@kernel-regex" per run: ncu stall reasons of NCUC launches after NCUS, no graphs), NCUSRC (the same: the SASS lines that stall most):
# lists that replace the defaults.
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
# BD: the build folder (default build-gpu; one outside the carried snapshot, e.g. /tmp/bg, stays
# on a warm machine, so a second call rebuilds only what changed); the 30B file is made once a machine.
BD=${BD:-build-gpu}
O=${OUT:-/tmp/out}; mkdir -p $O; B=$BD/glim; M=/tmp/m30.gguf
if [ -n "${SMRATE:-}" ]; then   # SMRATE=1: first, dev/cuda/sm_rate.cu (SMs by GPC, each SM's read rate over runs; no glim build)
  nvcc -arch=sm_90 -O3 -o /tmp/sm_rate dev/cuda/sm_rate.cu && timeout 60 /tmp/sm_rate 20 >$O/sm_rate.txt 2>&1; el "sm_rate rc=$?"
  grep -v "^sm " $O/sm_rate.txt | head -20
fi
if [ -n "${CARVE:-}" ]; then   # CARVE=1: first, dev/cuda/carve_probe.cu (do CTAs needing a larger shared-memory split wait for an SM to drain?)
  nvcc -arch=sm_90 -O3 -o /tmp/carve_probe dev/cuda/carve_probe.cu && timeout 60 /tmp/carve_probe; el "carve probe rc=$?"
fi
if [ -n "${SWEEPP:-}" ]; then   # SWEEPP=1: first, dev/cuda/sweep_probe.cu (a warp a range vs the grid sweeping one front)
  nvcc -arch=sm_90 -O3 -o /tmp/sweep_probe dev/cuda/sweep_probe.cu && timeout 90 /tmp/sweep_probe; el "sweep probe rc=$?"
  [ "${SWEEPP}" = "only" ] && exit 0
fi
if [ -n "${FFNP:-}" ]; then   # FFNP=1 (or only): first, dev/cuda/ffn_probe.cu (the FFN split along its inner dimension vs two launches)
  nvcc -arch=sm_90 -O3 -o /tmp/ffn_probe dev/cuda/ffn_probe.cu && timeout 120 /tmp/ffn_probe >$O/ffn_probe.txt; r=$?; cat $O/ffn_probe.txt; el "ffn probe rc=$r"
  [ "${FFNP}" = "only" ] && exit 0
fi
if [ -n "${TAILP:-}" ]; then   # TAILP=1 (or only): first, dev/cuda/tail_probe.cu (a launch's tail; a pool of chunks for its last part)
  nvcc -arch=sm_90 -O3 -o /tmp/tail_probe dev/cuda/tail_probe.cu && timeout 120 /tmp/tail_probe; el "tail probe rc=$?"
  [ "${TAILP}" = "only" ] && exit 0
fi
if [ -n "${QUEUEP:-}" ]; then   # QUEUEP=1 (or only): first, dev/cuda/queue_probe.cu (do L2 hits wait behind a flood of bulk copies?)
  nvcc -arch=sm_90 -O3 -o /tmp/queue_probe dev/cuda/queue_probe.cu && timeout 120 /tmp/queue_probe; el "queue probe rc=$?"
  [ "${QUEUEP}" = "only" ] && exit 0
fi
if [ -n "${HALF:-}" ]; then
  nvcc -arch=sm_90 -O3 -o /tmp/half_model dev/cuda/half_model.cu && timeout 60 /tmp/half_model; el "half model rc=$?"
fi
# the goldens read every folder test_golden_gpu names; a missing one fails them (2026-12-07: three
# goldens "failed" twice for want of glimmer-tiny/, docs/PERFORMANCE.md "How to measure")
for d in muse-glimmer-tiny glimmer-tiny models goldens; do
  [ -d .gpu/testdata/$d ] || echo "WARNING: .gpu/testdata/$d missing: test_golden_gpu will fail (carry it)"
done
cmake -S . -B $BD -DGLIM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
      -DGLIM_TESTDATA=$PWD/.gpu/testdata >/tmp/cfg.log 2>&1 && cmake --build $BD -j16 --target glim-cli test_golden_gpu test_cuda_ops ${UNITS:-} >/tmp/build.log 2>&1 \
  || { echo BUILD FAILED; grep -E "error" /tmp/build.log | head -20; exit 1; }
el "build ok"
if grep -q "mk rc=0" /tmp/mk.log 2>/dev/null && [ -f $M ]; then echo "mk rc=0 (kept from an earlier call)" >/tmp/mk.log; ( true ) &
else ( $B mkmodel --preset muse-glimmer-30b --vocab 202048 --unique-rows 256 -q -o $M >/tmp/mk.log 2>&1; echo "mk rc=$?" >>/tmp/mk.log ) &
fi
MK=$!
for c in ${GOLD:-X=1 GLIM_CUDA_T16=1}; do
  env ${c//,/ } timeout 100 $BD/tests/test_golden_gpu >/tmp/gold.log 2>&1; echo "test_golden_gpu $c rc=$?"; grep -m5 FAIL /tmp/gold.log
done
TFAIL=0   # a failed (or hung) op test drops EXTRA, NGEXTRA and TRACE (their settings are what it tests)
for t in ${TESTS:-test_glu_fuse test_add_rmsnorm_xq test_matmul_glu}; do
  env ${TENV:-X=1} GLIM_TEST_ONLY=$t timeout 60 $BD/tests/test_cuda_ops >/tmp/t.log 2>&1; r=$?; echo "$t rc=$r $(tail -1 /tmp/t.log)"; grep -m8 -E "FAIL|differs|CHECK" /tmp/t.log
  [ $r = 0 ] || TFAIL=1
done
if [ $TFAIL = 1 ] && [ -z "${KEEP_EXTRA:-}" ]; then echo "op tests failed: EXTRA, NGEXTRA, TRACE dropped (KEEP_EXTRA=1 keeps them)"; EXTRA=""; NGEXTRA=""; TRACE=""; fi
for u in ${UNITS:-}; do
  timeout 120 $BD/tests/$u >/tmp/u.log 2>&1; echo "$u rc=$? $(tail -1 /tmp/u.log)"; grep -E "^  |FAIL" /tmp/u.log | head -12
done
if [ -n "${OPS_S:-}" ]; then   # OPS_S=seconds: the whole op test (OPS_ENV: its env; GLIM_TEST_QUICK=1: without the caches past 10000 slots)
  env ${OPS_ENV:-X=1} timeout $OPS_S stdbuf -oL $BD/tests/test_cuda_ops >/tmp/ops.log 2>&1; echo "test_cuda_ops rc=$? $(tail -1 /tmp/ops.log)"
  grep -m8 FAIL /tmp/ops.log; cp /tmp/ops.log $O/
fi
if [ -n "${GEMVB:-}" ]; then   # GEMVB="two": dev/cuda/gemv_bench.c against the build's libglim (its own GPU time, ~20-60 s)
  cc -O2 -std=gnu11 -Iinclude -Isrc dev/cuda/gemv_bench.c $BD/src/libglim.a /usr/local/cuda/lib64/libcudart_static.a \
     -L/usr/local/cuda/lib64 -lcublas -lstdc++ -lpthread -lm -ldl -lrt -o /tmp/gemv_bench 2>/tmp/gb_cc.log \
    && timeout 120 /tmp/gemv_bench $GEMVB 2>&1 | tee $O/gemv_bench.txt | grep -E "copy|rows=" | cut -c1-140 \
    || { echo "gemv_bench failed"; head -5 /tmp/gb_cc.log; }
fi
wait $MK; tail -1 /tmp/mk.log
python3 -c "import torch; p=torch.cuda.get_device_properties(0); print(\"L2 bytes\", p.L2_cache_size)" 2>/dev/null
el "tests, model"
tg() { local label=$1; shift; local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  # SMI=1: the SM and memory clocks, power and throttle reasons every 0.1 s while the bench runs
  [ -n "${SMI:-}" ] && { nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active \
      --format=csv,noheader,nounits -lms 100 >/tmp/smi.log 2>/dev/null & SMIP=$!; }
  env "${envs[@]}" timeout ${TG_TIMEOUT:-120} $B bench -m $M --device cuda "$@" >/tmp/tg.log 2>&1; local rc=$?
  [ -n "${SMI:-}" ] && { kill $SMIP 2>/dev/null; wait $SMIP 2>/dev/null; python3 dev/cuda/smi_sum.py /tmp/smi.log "$label"; }
  grep -E "^\| " /tmp/tg.log | grep -v -- "---" | grep -v "model  " | sed "s/^/$label: /" | sed "s/| muse-glimmer.*CUDA *| *16 |//"
  cp /tmp/tg.log "$O/tg-${label//[^A-Za-z0-9]/_}.log"; [ $rc = 0 ] || { echo "$label: rc=$rc"; tail -5 /tmp/tg.log; }; }
tg default X=1 -- -p 512 -n 128 -r 3
tg default-nograph X=1 -- -p 0 -n 128 -r 2 --no-graph
if [ -n "${GREEDY:-}" ]; then
  tg greedy X=1 -- -p 0 -n 128 -r 3 --greedy
  tg greedy-nograph X=1 -- -p 0 -n 128 -r 2 --greedy --no-graph
fi
for s in ${SKIPS:-1 2 4 8 3 12 15}; do tg skip$s GLIM_CUDA_DBG_SKIP=$s -- -p 0 -n 128 -r 3; done
for e in ${EXTRA:-}; do tg "$e" ${e//,/ } -- -p 0 -n 128 -r 3; done
for e in ${NGEXTRA:-}; do tg "$e-nograph" ${e//,/ } -- -p 0 -n 128 -r 2 --no-graph; done
for e in ${DEXTRA:-}; do tg "$e-d32768" ${e//,/ } -- -p 0 -n 64 -d 32768 -r 1; done   # DEXTRA="X=1 env,env": depth 32768 per env
for e in ${TRACE:-}; do   # TRACE="env,env env": per-warp times of the v5 launches of one graph replay (gemv_mma.cu)
  env ${e//,/ } GLIM_CUDA_V5_TRACE=1 timeout 120 $B bench -m $M --device cuda -p 0 -n 16 -r 1 >/tmp/trace.log 2>&1
  f=$O/trace-${e//[^A-Za-z0-9]/_}.txt; grep "^v5 " /tmp/trace.log >$f; echo "trace $e: $(wc -l <$f) lines"; sed -n 2,4p $f
  python3 dev/cuda/v5_trace_sum.py $f
done
for e in ${STRACE:-}; do   # STRACE="env,env ...": the short attention's stamps (GLIM_CUDA_SHORT_TRACE=1, attn_short.cu), one graph replay
  env ${e//,/ } GLIM_CUDA_SHORT_TRACE=1 timeout 120 $B bench -m $M --device cuda -p 0 -n 16 -r 1 >/tmp/strace.log 2>&1
  echo "short trace $e:"; grep -E "^short trace" /tmp/strace.log
done
for e in ${NCU:-}; do   # NCU="env,env@kernel-regex ...": ncu stall reasons and throughputs of NCUC (default 3) launches after NCUS (300), no graphs
  k=${e#*@}; v=${e%@*}; NB=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  env ${v//,/ } timeout 240 $NB --clock-control none --kernel-name regex:"$k" --launch-skip ${NCUS:-300} --launch-count ${NCUC:-3} \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
    --section SchedulerStats --section InstructionStats \
    --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
    $B bench -m $M --device cuda -p 0 -n 4 -r 1 --no-graph >/tmp/ncu.log 2>&1; echo "ncu $e rc=$?"
  cp /tmp/ncu.log "$O/ncu-${e//[^A-Za-z0-9]/_}.log"
  grep -E "gemv5_kernel|Duration|DRAM Throughput|Memory Throughput|Issue Slots|Eligible Warps|Active Warps Per|Warp Cycles Per Issued|Executed Ipc A|stalled" /tmp/ncu.log \
    | awk '$NF+0 >= 0.05 || $0 ~ /kernel|Duration|Throughput/' | head -${NCU_LINES:-60}
done
for e in ${NCUSRC:-}; do   # NCUSRC="env,env@kernel-regex ...": the SASS lines with the most warp stall samples (one launch after NCUS)
  k=${e#*@}; v=${e%@*}; NB=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1); rm -f /tmp/src.ncu-rep
  env ${v//,/ } timeout 240 $NB --clock-control none --kernel-name regex:"$k" --launch-skip ${NCUS:-300} --launch-count 1 \
    --section SourceCounters --section WarpStateStats -o /tmp/src $B bench -m $M --device cuda -p 0 -n 4 -r 1 --no-graph >/tmp/ncus.log 2>&1
  echo "ncu source $e rc=$?"; $NB --import /tmp/src.ncu-rep --page source --print-source sass --csv >/tmp/src.csv 2>&1
  f="$O/src-${e//[^A-Za-z0-9]/_}.csv"; cp /tmp/src.csv "$f"; python3 dev/cuda/ncu_src_sum.py /tmp/src.csv ${NCUSRC_N:-30}
done
if [ -n "${TL:-}" ]; then   # TL="env,env env" (X=1: the default): kernel timeline, each kernel's exposed time (dev/cuda/timeline.py)
  CH=$(find /usr/local/cuda*/ /usr/lib/python3*/ /usr/local/lib/python3*/ -name cupti.h 2>/dev/null | head -1)
  CL=$(find /usr/local/cuda*/ /usr/lib/python3*/ /usr/local/lib/python3*/ -name 'libcupti.so*' 2>/dev/null | head -1)
  KREC=$(grep -oh "CUpti_ActivityKernel[0-9]*" $(dirname "$CH")/cupti_activity*.h 2>/dev/null | sort -V | tail -1)
  echo "TL: cupti.h at ${CH:-none}, lib ${CL:-none}, record ${KREC:-?}"
  if [ -n "$CH" ] && [ -n "$CL" ] && cc -O2 -shared -fPIC -o /tmp/libkt.so dev/cuda/kt_trace.c -I"$(dirname "$CH")" \
       -DKT_KREC=$KREC "$CL" -Wl,-rpath,"$(dirname "$CL")" 2>/tmp/kt.log; then
    for e in $TL; do
      env ${e//,/ } KT_TRACE_OUT=/tmp/tl.csv LD_PRELOAD=/tmp/libkt.so timeout 120 $B bench -m $M --device cuda \
        -p 0 -n 48 -r 1 >/tmp/tl.out 2>&1 || { echo "TL $e: failed"; tail -3 /tmp/tl.out; continue; }
      c++filt </tmp/tl.csv >/tmp/tl2.csv
      echo "== timeline $e ($(grep -c . /tmp/tl2.csv) kernels; $(grep "tg48" /tmp/tl.out | head -1))"
      python3 dev/cuda/timeline.py /tmp/tl2.csv 2>&1 | head -${TL_LINES:-28}
      python3 dev/cuda/chain.py /tmp/tl2.csv 2>&1 | head -24   # one layer's chain, kernel by kernel
      gzip -c /tmp/tl2.csv >"$O/tl-${e//[^A-Za-z0-9]/_}.csv.gz"
    done
  else
    echo "TL: no CUPTI build"; head -5 /tmp/kt.log
  fi
fi
if [ -n "${LCMP:-}" ]; then   # LCMP="env,env ...": the 30B file's logits (4 prompt ids, 12 greedy steps) vs the default's (LBASE: another env's)
  ev() { env ${1//,/ } timeout 120 $B eval -m $M --device cuda -q --tokens 1,2,3,4 --generate 12 --ctx 64 --logits-out $2 2>&1 | grep -iE "^gen|ids|error" | head -2; }
  ev "${LBASE:-X=1}" /tmp/l0.bin
  for e in $LCMP; do
    ev "$e" /tmp/l1.bin
    python3 -c "
import sys, numpy as np
a = np.fromfile('/tmp/l0.bin', dtype=np.float32); b = np.fromfile('/tmp/l1.bin', dtype=np.float32)
if a.size != b.size or a.size == 0: print('logits $e: sizes', a.size, b.size); sys.exit()
d = np.abs(a - b); print('logits $e: identical' if not d.any() else 'logits $e: differ, max abs %.3g, max rel %.3g, %d of %d' % (d.max(), (d / (np.abs(a) + 1e-6)).max(), (d > 0).sum(), a.size))
" 2>&1
  done
fi
if [ -n "${DEPTH:-}" ]; then   # DEPTH=1: the issue's other figures at the default (membw, pp4096, depths, memory at 131072)
  $B bench --membw --device cuda 2>&1 | grep -iE "GB/s|copy" | head -3
  tg pp4096 X=1 -- -p 4096 -n 0 -r 2
  tg depth X=1 -- -p 0 -n 128 -d 4096,32768 -r 1
  ( while sleep 0.5; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits; done ) >/tmp/mem.log &
  MP=$!; S=$(date +%s)
  TG_TIMEOUT=380 tg d131072 X=1 -- -p 0 -n 128 -d 131072 -r 1
  kill $MP; echo "d131072 run took $(( $(date +%s) - S )) s; GPU memory used max (MiB): $(sort -n /tmp/mem.log | tail -1)"
  el "depths done"
fi
tg default-again X=1 -- -p 0 -n 128 -r 3
el "all done"
