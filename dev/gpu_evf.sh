#!/bin/bash
# dev/gpu_evf.sh — one device call (repo root on the GPU machine): the decode step's memory
# order. Four builds: default; -DGLIM_PDL_EARLY (the small kernels let the next GEMV launch
# before they wait); -DGLIM_EVF (weight loads evict-first in L2, so the small kernels'
# activations and norm weights stay cached); both. Goldens for each, the GEMV tests on the EVF
# build, tg128 on the 30B preset for each, ncu's per-kernel breakdown of the EVF build.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=${OUT:-/tmp/out}; mkdir -p $O; M=/tmp/m30.gguf
cfg() { cmake -S . -B $1 -DGLIM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
      -DGLIM_TESTDATA=$PWD/.gpu/testdata "${@:2}" >/tmp/cfg-$1.log 2>&1; }
cfg build-gpu && cmake --build build-gpu -j16 --target glim-cli test_golden_gpu >/tmp/build.log 2>&1 \
  || { echo BUILD FAILED; grep -E "error" /tmp/build.log | head -20; exit 1; }
el "build ok"
( ./build-gpu/glim mkmodel --preset muse-glimmer-30b --vocab 202048 --unique-rows 256 -q -o $M >/tmp/mk.log 2>&1; echo "mk rc=$?" >>/tmp/mk.log ) &
MK=$!
bld() { local d=$1 flags=$2; shift 2
  ( cfg $d "-DCMAKE_CUDA_FLAGS=$flags" && cmake --build $d -j5 --target "$@" >/tmp/build-$d.log 2>&1; echo "$d build rc=$?" >>/tmp/build-$d.log ) & }
bld build-evf "-DGLIM_EVF" glim-cli test_golden_gpu; P1=$!
bld build-ear "-DGLIM_PDL_EARLY" glim-cli test_golden_gpu; P2=$!
bld build-both "-DGLIM_PDL_EARLY -DGLIM_EVF" glim-cli test_golden_gpu; P3=$!
wait $P1 $P2 $P3; for d in build-evf build-ear build-both; do tail -1 /tmp/build-$d.log; grep -m3 error /tmp/build-$d.log; done
el "builds"
for d in build-gpu build-evf build-ear build-both; do
  timeout 100 ./$d/tests/test_golden_gpu >/tmp/gold.log 2>&1; echo "test_golden_gpu $d rc=$?"; grep -m5 FAIL /tmp/gold.log
done
# (test_t16, test_gemv_v5, test_gemv_v3 passed on the EVF build at 2c0e6b6)
wait $MK; tail -1 /tmp/mk.log
el "tests, model"
tg() { local label=$1 bin=$2; shift 2; local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 120 $bin bench -m $M --device cuda "$@" >/tmp/tg.log 2>&1; local rc=$?
  grep -E "^\| |loaded" /tmp/tg.log | grep -v -- "---" | grep -v "model  " | sed "s/^/$label: /"
  [ $rc = 0 ] || { echo "$label: rc=$rc"; tail -5 /tmp/tg.log; }; }
for d in build-gpu build-evf build-ear build-both; do tg $d ./$d/glim X=1 -- -p 0 -n 128 -r 3; done
tg evf-nograph ./build-evf/glim X=1 -- -p 0 -n 128 -r 2 --no-graph
tg both-nograph ./build-both/glim X=1 -- -p 0 -n 128 -r 2 --no-graph
tg evf-pp ./build-evf/glim X=1 -- -p 512 -n 0 -r 2
el "e2e done"
timeout ${BRK_S:-100} ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --page raw ./build-evf/glim bench -m $M --device cuda \
      -p 0 -n 2 -r 1 --no-graph >/tmp/brk.csv 2>/tmp/brk.err; echo "ncu rc=$?"
python3 dev/cuda/kernel_breakdown.py /tmp/brk.csv 3 2>&1 | head -16; cp /tmp/brk.csv $O/ 2>/dev/null
el "all done"
