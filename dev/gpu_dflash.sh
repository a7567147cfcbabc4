#!/bin/bash
# dev/gpu_dflash.sh — one device call (repo root on the GPU machine): build the CLI and the GPU tests,
# run the goldens and chosen op tests, then time DFlash on the 30B preset with the dflash-30b drafter
# (random weights: nothing is accepted, every cycle is one draft and one verify of B rows).
# E.g. GOLD="X=1" TESTS=" " ENVS="X=1 GLIM_CUDA_V5_NR_ROWS=0" BS="16 8 4" bash dev/gpu_dflash.sh
# GOLD (env per goldens run), TESTS/TENV (op tests), ENVS (comma-joined env per DFlash run), BS (block lengths).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
B=./build-gpu/glim; M=/tmp/m30.gguf; D=/tmp/d30.gguf
cmake -S . -B build-gpu -DGLIM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
      -DGLIM_TESTDATA=$PWD/.gpu/testdata >/tmp/cfg.log 2>&1 && cmake --build build-gpu -j16 --target glim-cli test_golden_gpu test_cuda_ops >/tmp/build.log 2>&1 \
  || { echo BUILD FAILED; grep -E "error" /tmp/build.log | head -20; exit 1; }
el "build ok"
( $B mkmodel --preset muse-glimmer-30b --vocab 202048 --unique-rows 256 -q -o $M >/tmp/mk.log 2>&1 &&
  $B mkmodel --arch dflash --preset dflash-muse-glimmer-30b --vocab 202048 -q -o $D >>/tmp/mk.log 2>&1; echo "mk rc=$?" >>/tmp/mk.log ) &
MK=$!
for c in ${GOLD:-X=1}; do
  env ${c//,/ } timeout 100 ./build-gpu/tests/test_golden_gpu >/tmp/gold.log 2>&1; echo "test_golden_gpu $c rc=$?"; grep -m5 FAIL /tmp/gold.log
done
for t in ${TESTS:-}; do
  env ${TENV:-X=1} GLIM_TEST_ONLY=$t timeout 60 ./build-gpu/tests/test_cuda_ops >/tmp/t.log 2>&1; echo "$t rc=$? $(tail -1 /tmp/t.log)"; grep -m4 FAIL /tmp/t.log
done
wait $MK; tail -1 /tmp/mk.log
el "tests, models"
for e in ${ENVS:-X=1}; do
  for bl in ${BS:-16 8}; do
    env ${e//,/ } timeout 90 $B eval -m $M --device cuda --tokens 1,2,3,4,5,6,7,8 --draft $D --block-length $bl \
      --generate 48 --ctx 4096 2>&1 | grep -E "^dflash" | sed "s/^/$e B=$bl: /"
  done
done
el "all done"
