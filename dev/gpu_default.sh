#!/bin/bash
# dev/gpu_default.sh — one device call (repo root on the GPU machine): the defaults as shipped.
# Build the CLI, the GPU goldens and the op test (its new parts; OPS_S=seconds: all of it), the goldens (default: tiles for the big
# matrices on sm_90; and all row-major), then the 30B preset: pp512/tg128 with graphs,
# tg128 without, add_rmsnorm loading its norm weights and x (GLIM_CUDA_NORM_EARLY=1) or only
# the weights (=2) before its PDL wait, the FFN's SwiGLU quantized by the gate/up GEMV
# (GLIM_CUDA_GLU_FUSE=1), and the default again (the spread between runs).
# Measured with it 2026-12-03 16:13 (f104936): v5 wait-first, U=3, W=12 (all slower).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=${OUT:-/tmp/out}; mkdir -p $O; B=./build-gpu/glim; M=/tmp/m30.gguf
cmake -S . -B build-gpu -DGLIM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
      -DGLIM_TESTDATA=$PWD/.gpu/testdata >/tmp/cfg.log 2>&1 && cmake --build build-gpu -j16 --target glim-cli test_golden_gpu test_cuda_ops >/tmp/build.log 2>&1 \
  || { echo BUILD FAILED; grep -E "error" /tmp/build.log | head -20; exit 1; }
el "build ok"
( $B mkmodel --preset muse-glimmer-30b --vocab 202048 --unique-rows 256 -q -o $M >/tmp/mk.log 2>&1; echo "mk rc=$?" >>/tmp/mk.log ) &
MK=$!
# (the goldens' models are too small for the default tiles: T16=1 puts the GLU fold on them)
for c in X=1 GLIM_CUDA_T16=0 GLIM_CUDA_NORM_EARLY=1 GLIM_CUDA_NORM_EARLY=2 GLIM_CUDA_T16=1,GLIM_CUDA_GLU_FUSE=1; do
  env ${c//,/ } timeout 100 ./build-gpu/tests/test_golden_gpu >/tmp/gold.log 2>&1; echo "test_golden_gpu $c rc=$?"; grep -m5 FAIL /tmp/gold.log
done
for t in test_glu_fuse test_matmul_glu test_matmul_q8 test_add_rmsnorm_xq; do   # new or touched 2026-12-03 16:30
  [ -x ./build-gpu/tests/test_cuda_ops ] || break
  GLIM_TEST_ONLY=$t timeout 60 ./build-gpu/tests/test_cuda_ops >/tmp/t.log 2>&1; echo "$t rc=$? $(tail -1 /tmp/t.log)"; grep -m4 FAIL /tmp/t.log
done
if [ -n "${OPS_S:-}" ]; then   # the whole op test, when the call has time for it
  timeout $OPS_S stdbuf -oL ./build-gpu/tests/test_cuda_ops >/tmp/ops.log 2>&1; echo "test_cuda_ops rc=$? $(tail -1 /tmp/ops.log)"
  grep -m8 FAIL /tmp/ops.log; cp /tmp/ops.log $O/
fi
wait $MK; tail -1 /tmp/mk.log
el "tests, model"
tg() { local label=$1; shift; local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 120 $B bench -m $M --device cuda "$@" >/tmp/tg.log 2>&1; local rc=$?
  grep -E "^\| |loaded" /tmp/tg.log | grep -v -- "---" | grep -v "model  " | sed "s/^/$label: /"
  [ $rc = 0 ] || { echo "$label: rc=$rc"; tail -5 /tmp/tg.log; }; }
tg default X=1 -- -p 512 -n 128 -r 3
tg default-nograph X=1 -- -p 0 -n 128 -r 2 --no-graph
for e in 1 2; do tg norm-early$e GLIM_CUDA_NORM_EARLY=$e -- -p 0 -n 128 -r 3; done
tg glu-fuse GLIM_CUDA_GLU_FUSE=1 -- -p 0 -n 128 -r 3
tg glu-fuse-norm2 GLIM_CUDA_GLU_FUSE=1 GLIM_CUDA_NORM_EARLY=2 -- -p 0 -n 128 -r 3
tg default-again X=1 -- -p 0 -n 128 -r 3
el "all done"
