#!/bin/bash
# dev/gpu_t16.sh — one device call for the T16 tiles + GEMV v5 default (repo root on the GPU machine):
# build, the GEMV tests (test_t16, test_gemv_v5, test_gemv_v3), the goldens with and without tiles,
# the GEMVs at 1 and 8 activation rows (8: DFlash verify's v2 on tiles), then the 30B preset end to
# end: tg128 and pp512, row-major (default) against tiles (GLIM_CUDA_T16=1: one-row matmuls on v5), and
# the opt-in v5 paths written 2026-12-03 without a GPU: GLIM_CUDA_V5_MIX=1 (q/k/gate + v in one launch),
# GLIM_CUDA_V5_NR=1 (2..16 rows of Q4_K on the tensor cores).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=${OUT:-/tmp/out}; mkdir -p $O; B=./build-gpu/glim; M=/tmp/m30.gguf
cmake -S . -B build-gpu -DGLIM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
      -DGLIM_TESTDATA=$PWD/.gpu/testdata >/tmp/cfg.log 2>&1 && cmake --build build-gpu -j16 >/tmp/build.log 2>&1 \
  || { echo BUILD FAILED; grep -E "error" /tmp/build.log | head -20; exit 1; }
el "build ok"
( $B mkmodel --preset muse-glimmer-30b --vocab 202048 --unique-rows 256 -q -o $M >/tmp/mk.log 2>&1; echo "mk rc=$?" >>/tmp/mk.log ) &
MK=$!
for cfg in X=1 GLIM_CUDA_V5_NR=1 GLIM_CUDA_V5_MIX=1; do   # the opt-in v5 paths compare with v2 / v5 on rows
  env $cfg GLIM_TEST_ONLY=test_t16 timeout 150 ./build-gpu/tests/test_cuda_ops >/tmp/t16.log 2>&1; echo "test_t16 $cfg rc=$? $(tail -1 /tmp/t16.log)"
  grep -m5 FAIL /tmp/t16.log
done
for t in test_gemv_v5 test_gemv_v3; do
  GLIM_TEST_ONLY=$t timeout 150 ./build-gpu/tests/test_cuda_ops >/tmp/$t.log 2>&1; echo "$t rc=$? $(tail -1 /tmp/$t.log)"
  grep -m5 FAIL /tmp/$t.log
done
el "gemv tests"
for cfg in X=1 GLIM_CUDA_T16=1 GLIM_CUDA_T16=1,GLIM_CUDA_V5_NR=1,GLIM_CUDA_V5_MIX=1; do
  env ${cfg//,/ } timeout 150 ./build-gpu/tests/test_golden_gpu >/tmp/gold.log 2>&1; echo "test_golden_gpu $cfg rc=$?"
  grep -m5 FAIL /tmp/gold.log
done
el "goldens"
cc -O2 -std=gnu11 -Iinclude -Isrc dev/cuda/gemv_bench.c build-gpu/src/libglim.a /usr/local/cuda/lib64/libcudart_static.a \
   -L/usr/local/cuda/lib64 -lcublas -lstdc++ -lpthread -lm -ldl -lrt -o /tmp/gemv_bench
for cfg in X=1 GLIM_CUDA_T16=1 GLIM_CUDA_T16=1,GLIM_CUDA_V5_NR=1; do echo "== gemv $cfg"; env ${cfg//,/ } timeout 60 /tmp/gemv_bench quick 2>&1 | sed "/summary/q" | grep -E "rows=(1|8) "; done
el "gemv bench"
wait $MK; tail -1 /tmp/mk.log
tg() { local label=$1; shift; local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 120 $B bench -m $M --device cuda "$@" 2>&1 | grep -E "^\| |t/s x|loaded" | grep -v -- "---" | sed "s/^/$label: /"; }
tg rowmajor X=1 -- -p 512 -n 128 -r 3
tg t16 GLIM_CUDA_T16=1 -- -p 512 -n 128 -r 3
tg t16-nograph GLIM_CUDA_T16=1 -- -p 0 -n 128 -r 2 --no-graph
tg t16-mix GLIM_CUDA_T16=1 GLIM_CUDA_V5_MIX=1 -- -p 0 -n 128 -r 3
el "e2e done"
# the whole op test with tiles everywhere (what the default would be with T16 on), in what time is left
GLIM_CUDA_T16=1 timeout ${OPS_S:-200} ./build-gpu/tests/test_cuda_ops >/tmp/ops16.log 2>&1; echo "test_cuda_ops T16=1 rc=$? $(tail -1 /tmp/ops16.log)"
grep -m8 FAIL /tmp/ops16.log; cp /tmp/ops16.log $O/
el "all done"
