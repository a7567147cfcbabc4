#!/bin/bash
# dev/gpu_pf.sh — one device call (repo root on the GPU machine): tiles for the big matrices only
# (the new sm_90 default, GLIM_CUDA_T16_MIN), v5's L2 prefetch before its PDL wait
# (GLIM_CUDA_V5_PF=units) and the small kernels' PDL trigger before their wait (a second build
# with -DGLIM_PDL_EARLY). Tests of the paths, then tg128 on the 30B preset for each, then ncu's
# per-kernel breakdown of the default in what time is left.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=${OUT:-/tmp/out}; mkdir -p $O; B=./build-gpu/glim; BE=./build-gpe/glim; M=/tmp/m30.gguf
cfg() { cmake -S . -B $1 -DGLIM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
      -DGLIM_TESTDATA=$PWD/.gpu/testdata "${@:2}" >/tmp/cfg-$1.log 2>&1; }
cfg build-gpu && cmake --build build-gpu -j16 >/tmp/build.log 2>&1 \
  || { echo BUILD FAILED; grep -E "error" /tmp/build.log | head -20; exit 1; }
el "build ok"
( $B mkmodel --preset muse-glimmer-30b --vocab 202048 --unique-rows 256 -q -o $M >/tmp/mk.log 2>&1; echo "mk rc=$?" >>/tmp/mk.log ) &
MK=$!
( cfg build-gpe -DCMAKE_CUDA_FLAGS=-DGLIM_PDL_EARLY && cmake --build build-gpe -j8 --target glim test_golden_gpu >/tmp/build-e.log 2>&1; echo "early build rc=$?" >>/tmp/build-e.log ) &
BEP=$!
for c in X=1 GLIM_CUDA_V5_PF=8; do
  env $c GLIM_TEST_ONLY=test_t16 timeout 150 ./build-gpu/tests/test_cuda_ops >/tmp/t16.log 2>&1; echo "test_t16 $c rc=$? $(tail -1 /tmp/t16.log)"
  grep -m5 FAIL /tmp/t16.log
done
GLIM_TEST_ONLY=test_gemv_v5 timeout 150 ./build-gpu/tests/test_cuda_ops >/tmp/v5.log 2>&1; echo "test_gemv_v5 rc=$? $(tail -1 /tmp/v5.log)"
for c in X=1 GLIM_CUDA_T16=1,GLIM_CUDA_V5_PF=8; do
  env ${c//,/ } timeout 150 ./build-gpu/tests/test_golden_gpu >/tmp/gold.log 2>&1; echo "test_golden_gpu $c rc=$?"
  grep -m5 FAIL /tmp/gold.log
done
el "tests"
wait $BEP; tail -1 /tmp/build-e.log
GLIM_CUDA_T16=1 GLIM_CUDA_V5_PF=8 timeout 150 ./build-gpe/tests/test_golden_gpu >/tmp/gold.log 2>&1; echo "test_golden_gpu early T16=1 PF=8 rc=$?"
grep -m5 FAIL /tmp/gold.log
wait $MK; tail -1 /tmp/mk.log
el "early tests, model"
tg() { local label=$1 bin=$2; shift 2; local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 120 $bin bench -m $M --device cuda "$@" 2>&1 | grep -E "^\| |loaded" | grep -v -- "---" | grep -v "model  " | sed "s/^/$label: /"; }
tg auto $B X=1 -- -p 512 -n 128 -r 3
tg rowmajor $B GLIM_CUDA_T16=0 -- -p 0 -n 128 -r 2
tg t16-all $B GLIM_CUDA_T16=1 -- -p 0 -n 128 -r 2
for pf in 4 8 16; do tg auto-pf$pf $B GLIM_CUDA_V5_PF=$pf -- -p 0 -n 128 -r 2; done
tg auto-min4 $B GLIM_CUDA_T16_MIN=4 -- -p 0 -n 128 -r 2
tg early-auto $BE X=1 -- -p 0 -n 128 -r 2
tg early-pf8 $BE GLIM_CUDA_V5_PF=8 -- -p 0 -n 128 -r 2
tg early-pf16 $BE GLIM_CUDA_V5_PF=16 -- -p 0 -n 128 -r 2
tg auto-nograph $B X=1 -- -p 0 -n 128 -r 2 --no-graph
el "e2e done"
timeout ${BRK_S:-150} ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --page raw $B bench -m $M --device cuda \
      -p 0 -n 2 -r 1 --no-graph >/tmp/brk.csv 2>/tmp/brk.err; echo "ncu rc=$?"
python3 dev/cuda/kernel_breakdown.py /tmp/brk.csv 3 2>&1 | head -40; cp /tmp/brk.csv $O/ 2>/dev/null
el "all done"
