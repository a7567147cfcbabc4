#!/bin/bash
# dev/gpu_final.sh — short device call: build, kernel tests, GPU goldens, and the
# 30B decode at depth 0 and 4096 with today's and the previous attention.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
B=./build-gpu/glim
cmake -S . -B build-gpu -DGLIM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGLIM_TESTDATA=$PWD/.gpu/testdata >/tmp/cfg.log 2>&1 \
  && cmake --build build-gpu -j16 >/tmp/build.log 2>&1 || { echo BUILD FAILED; grep error /tmp/build.log | head; exit 1; }
el build
( $B mkmodel --preset muse-glimmer-30b --vocab 202048 -q -o /tmp/m30.gguf >/tmp/mk.log 2>&1; echo "mk rc=$?" >>/tmp/mk.log ) &
timeout 100 ./build-gpu/tests/test_cuda_ops 2>&1 | grep -E "ok$|FAIL|checks|CHECK" | tail -22
el cuda_ops
timeout 30 ./build-gpu/tests/test_golden_gpu 2>&1 | grep -E "ok$|FAIL|checks|dflash|CHECK" | tail -12
el goldens
wait; tail -1 /tmp/mk.log
timeout 50 $B bench -m /tmp/m30.gguf --device cuda -p 0 -n 64 -d 0,4096 -r 1 2>&1 | grep -E "tg"
el new
GLIM_CUDA_NEW=0 timeout 40 $B bench -m /tmp/m30.gguf --device cuda -p 0 -n 64 -d 4096 -r 1 2>&1 | grep -E "tg"
el old
