#!/bin/bash
# dev/gpu_e2e.sh — one batched GPU call: build glim with CUDA, run the gpu-labelled
# tests (goldens on the GPU, kernel tests), write the synthetic 30B target and its
# DFlash drafter, and time what issue "CUDA backend" asks for. Repo root, on the
# device machine: bash dev/gpu_e2e.sh 2>&1 | tee $OUT/log
set -u
B=./build-gpu/glim
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
nvidia-smi --query-gpu=name,clocks.mem,memory.used,memory.total --format=csv,noheader
cmake -S . -B build-gpu -DGLIM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGLIM_TESTDATA=$PWD/.gpu/testdata >/tmp/cfg.log 2>&1 \
  && cmake --build build-gpu -j16 >/tmp/build.log 2>&1 || { echo BUILD FAILED; grep -E "error" /tmp/build.log | head; exit 1; }
el "build ok"
( $B mkmodel --preset muse-glimmer-30b --vocab 202048 -q -o /tmp/m30.gguf >/tmp/mk.log 2>&1
  $B mkmodel --arch dflash --preset dflash-muse-glimmer-30b --vocab 202048 -q -o /tmp/d30.gguf >>/tmp/mk.log 2>&1; echo "mk rc=$?" >>/tmp/mk.log ) &
MK=$!
timeout 240 ctest --test-dir build-gpu -L gpu -V 2>&1 | grep -E " cuda|ok$|FAIL|checks|tests passed|skipped" | tail -30
el "gpu tests done"
wait $MK; tail -1 /tmp/mk.log; ls -la /tmp/m30.gguf /tmp/d30.gguf
el "models written"
$B bench --membw --device cuda
timeout 150 $B bench -m /tmp/m30.gguf --device cuda -p 512,4096 -n 128 -r 2
el "pp/tg done"
timeout 60 $B bench -m /tmp/m30.gguf --device cuda -p 0 -n 128 -r 2 --no-graph | grep tg128
el "no-graph done"
( while sleep 1; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits; done ) >/tmp/mem.log &
MP=$!
timeout 200 $B bench -m /tmp/m30.gguf --device cuda -p 0 -n 64 -d 4096,32768,131072 -r 1 | grep -E "tg|GPU"
kill $MP; echo "GPU memory used, max over the depth run (MiB): $(sort -n /tmp/mem.log | tail -1)"
el "depths done"
for bl in 4 8 16; do
  timeout 60 $B eval -m /tmp/m30.gguf --device cuda -q --draft /tmp/d30.gguf --block-length $bl \
    --tokens 1,2,3,4,5,6,7,8 --generate 40 2>&1 | grep -E "^dflash|^decode" | sed "s/^/B=$bl /"
done
timeout 60 $B eval -m /tmp/m30.gguf --device cuda -q --tokens 1,2,3,4,5,6,7,8 --generate 40 2>&1 | grep -E "^decode"
el "all done"
