#!/bin/bash
# dev/gpu_ab.sh — a lean A/B device call: this tree against a base commit on the same machine.
# From the root of a `git archive` snapshot (docs/PERFORMANCE.md "How to measure" on the GPU), with
# .gpu/testdata and .gpu/base (a `git archive` of the base commit) carried:
#   cd .gpu/snap && OUT=$OUT ENVS="GLIM_CUDA_X=1 ..." bash dev/gpu_ab.sh > $OUT/ab.log 2>&1; tail -40 $OUT/ab.log
# It builds both at once (base: /tmp/bb, this tree: /tmp/bg), makes the 30B preset file, runs the op
# tests named in TESTS (GLIM_TEST_QUICK=1; also under each comma-joined env of TENVS), then tg128 with graphs for the base, this tree, and this
# tree under each comma-joined env of ENVS, in turns (LCMP: first the 30B logits under those envs vs the default's), ROUNDS times (default 2); NG=1 adds one round
# without graphs. ~150 s on a fresh H100 for two envs (2026-12-06), against ~190 s through
# dev/gpu_bench.sh, which builds more and runs more by default.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
BASE=${BASE:-../base}; M=/tmp/m30.gguf
nvidia-smi --query-gpu=name --format=csv,noheader
cfg="-DGLIM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release"
(cd $BASE && cmake -S . -B /tmp/bb $cfg >/dev/null 2>&1 && cmake --build /tmp/bb -j6 --target glim-cli >/tmp/bb.log 2>&1
 echo "base build rc=$?" >/tmp/bb.done) &
cmake -S . -B /tmp/bg $cfg -DGLIM_TESTDATA=$PWD/.gpu/testdata >/dev/null 2>&1 &&
  cmake --build /tmp/bg -j10 --target glim-cli test_cuda_ops >/tmp/bg.log 2>&1 || { echo BUILD FAILED; grep error /tmp/bg.log | head; exit 1; }
el "build"
MK=""
if [ ! -f $M ]; then
  /tmp/bg/glim mkmodel --preset muse-glimmer-30b --vocab 202048 --unique-rows 256 -q -o $M >/tmp/mk.log 2>&1 &
  MK=$!
fi
for e in X=1 ${TENVS:-}; do   # TENVS: comma-joined envs the tests also run under
  for t in ${TESTS:-}; do
    env ${e//,/ } GLIM_TEST_QUICK=1 GLIM_TEST_ONLY=$t timeout 90 /tmp/bg/tests/test_cuda_ops >/tmp/t.log 2>&1
    echo "$t [$e] rc=$? $(tail -1 /tmp/t.log)"; grep -m6 -E "FAIL|CHECK" /tmp/t.log
  done
done
[ -n "$MK" ] && wait $MK; el "tests, model"
ev() { env ${1//,/ } timeout 120 /tmp/bg/glim eval -m $M --device cuda -q --tokens 1,2,3,4 --generate 12 --ctx 64 --logits-out $2 >/dev/null 2>&1; }
if [ -n "${LCMP:-}" ]; then   # LCMP="env,env ...": the 30B file's logits under each env against the default's, byte for byte
  ev X=1 /tmp/l0.bin
  for e in $LCMP; do ev "$e" /tmp/l1.bin; echo "logits [$e]: $(cmp -s /tmp/l0.bin /tmp/l1.bin && echo identical || echo DIFFER) ($(stat -c %s /tmp/l1.bin) bytes)"; done
fi
while [ ! -f /tmp/bb.done ]; do sleep 2; done; cat /tmp/bb.done
tg() {   # label binary env [bench args]
  local l=$1 b=$2 e=$3; shift 3
  env ${e//,/ } timeout 60 $b bench -m $M --device cuda -p 0 -n 128 "$@" 2>/dev/null | grep "| *tg128" | sed "s/^/$l: /"
}
for r in $(seq 1 ${ROUNDS:-2}); do
  tg "base $r" /tmp/bb/glim X=1 -r 3
  tg "new $r" /tmp/bg/glim X=1 -r 3
  for e in ${ENVS:-}; do tg "$e $r" /tmp/bg/glim $e -r 3; done
done
if [ -n "${NG:-}" ]; then
  tg "base no-graph" /tmp/bb/glim X=1 -r 2 --no-graph
  for e in X=1 ${ENVS:-}; do tg "$e no-graph" /tmp/bg/glim $e -r 2 --no-graph; done
fi
el "done"
