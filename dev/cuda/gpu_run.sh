#!/bin/bash
# dev/cuda/gpu_run.sh — one batched device call: build libglim with CUDA, run
# test_cuda_ops and the GEMV bench. Usage on the GPU machine (repo root):
#   bash dev/cuda/gpu_run.sh [bench]  2>&1 | tee $OUT/log
# If another room breaks the CMake build, the CUDA room and its test are
# built directly from their sources so the kernels can still be checked.
set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used --format=csv,noheader
B=build-gpu
LIB=""
if cmake -S . -B $B -DGLIM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/tmp/cfg.log 2>&1 &&
   cmake --build $B -j16 --target test_cuda_ops >/tmp/build.log 2>&1; then
    LIB=$B/src/libglim.a
    TEST=$B/tests/test_cuda_ops
    echo "cmake build ok"
else
    echo "cmake build failed; direct build"; grep -E "error" /tmp/build.log /tmp/cfg.log | head -20
    D=/tmp/direct; mkdir -p $D
    for f in src/base/*.c src/backend/*.c src/cpu/cpu_ref.c src/quant/*.c; do
        cc -O2 -std=gnu11 -Iinclude -Isrc -c $f -o $D/$(basename $f).o || exit 1
    done
    for f in src/cuda/*.cu; do
        nvcc -O3 -arch=sm_90 -Iinclude -Isrc -Xcompiler=-fno-threadsafe-statics,-fno-exceptions -c $f -o $D/$(basename $f).o &
    done
    wait
    ar rcs $D/libglim.a $D/*.o
    LIB=$D/libglim.a
    cc -O2 -std=gnu11 -DGLIM_HAVE_CUDA=1 -DGLIM_TESTDATA='"x"' -Iinclude -Isrc -Itests tests/test_cuda_ops.c $LIB \
       /usr/local/cuda/lib64/libcudart_static.a -L/usr/local/cuda/lib64 -lcublas -lpthread -lm -ldl -lrt -o $D/test_cuda_ops || exit 1
    TEST=$D/test_cuda_ops
fi
echo "== test_cuda_ops"
timeout 300 $TEST; echo "test rc=$?"
if [ "${1:-}" = bench ]; then
    cc -O2 -std=gnu11 -Iinclude -Isrc dev/cuda/gemv_bench.c $LIB /usr/local/cuda/lib64/libcudart_static.a \
       -L/usr/local/cuda/lib64 -lcublas -lpthread -lm -ldl -lrt -o /tmp/gemv_bench && timeout 200 /tmp/gemv_bench
    echo "bench rc=$?"
fi
