#!/bin/bash
# dev/cuda/gpu_run.sh — one batched device call: build libglim + glim with CUDA,
# run test_cuda_ops, the GEMV bench and (e2e) the 30B end-to-end bench.
# Usage on the GPU machine (repo root):
#   bash dev/cuda/gpu_run.sh [test] [bench|quick] [attn] [e2e] [fuse]  2>&1 | tee $OUT/log
# e2e writes a synthetic Muse Glimmer 30B (17 GB) to /tmp in the background
# while the tests and the kernel bench run, then times pp512/tg128.
set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used --format=csv,noheader
B=build-gpu
ARGS=" $* "
want() { case "$ARGS" in *" $1 "*) return 0;; esac; return 1; }
t0=$(date +%s)
if ! cmake -S . -B $B -DGLIM_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 ||
   ! cmake --build $B -j16 --target glim test_cuda_ops glim-cli >/tmp/build.log 2>&1; then
    echo "BUILD FAILED"; grep -E "error|Error" /tmp/build.log /tmp/cfg.log | head -30; exit 1
fi
echo "build ok ($(( $(date +%s) - t0 )) s)"
LIB=$B/src/libglim.a
if want e2e; then
    ( $B/glim mkmodel --preset muse-glimmer-30b --vocab 202048 -o /tmp/m30.gguf >/tmp/mk.log 2>&1;
      echo "mkmodel rc=$?" >>/tmp/mk.log ) &
    MK=$!
fi
if want test; then
    echo "== test_cuda_ops"
    timeout 400 $B/tests/test_cuda_ops; echo "test rc=$?"
fi
if want bench || want quick; then
    cc -O2 -std=gnu11 -Iinclude -Isrc dev/cuda/gemv_bench.c $LIB /usr/local/cuda/lib64/libcudart_static.a \
       -L/usr/local/cuda/lib64 -lcublas -lpthread -lm -ldl -lrt -o /tmp/gemv_bench || exit 1
    if want bench; then
        timeout 200 /tmp/gemv_bench; echo "bench rc=$?"
    fi
    if want quick; then
        for rw in 1 2; do echo "== GLIM_CUDA_GEMV_RW=$rw"; GLIM_CUDA_GEMV_RW=$rw timeout 100 /tmp/gemv_bench quick | head -28 | tail -24; done
    fi
fi
if want attn; then   # attention v2 vs v4 at Muse shapes, prefill estimate (dev/cuda/attn_bench.c)
    cc -O2 -std=gnu11 -Iinclude -Isrc dev/cuda/attn_bench.c $LIB /usr/local/cuda/lib64/libcudart_static.a \
       -L/usr/local/cuda/lib64 -lcublas -lstdc++ -lpthread -lm -ldl -lrt -o /tmp/attn_bench && timeout 300 /tmp/attn_bench
    echo "attn_bench rc=$?"
fi
if want e2e; then
    wait $MK; tail -2 /tmp/mk.log
    echo "== e2e (graphs)"
    timeout 200 $B/glim bench -m /tmp/m30.gguf --device cuda -p 512 -n 128 -r 3 2>&1 | tail -8
    if want exact; then
        echo "== e2e tg128 without graphs"
        timeout 60 $B/glim bench -m /tmp/m30.gguf --device cuda -p 0 -n 128 -r 2 --no-graph 2>&1 | tail -4
        echo "== e2e tg128 exact f32 GEMV (GLIM_CUDA_EXACT=1)"
        GLIM_CUDA_EXACT=1 timeout 60 $B/glim bench -m /tmp/m30.gguf --device cuda -p 0 -n 128 -r 2 2>&1 | tail -4
    fi
fi
if want prof; then   # per-kernel device time of eager decode steps (ncu replays each kernel)
    echo "== ncu per-kernel summary (decode, no graphs)"
    timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --launch-count 1200 --print-summary per-kernel \
        $B/glim bench -m /tmp/m30.gguf --device cuda -p 0 -n 2 -r 1 --no-graph >/tmp/ncu.log 2>&1
    echo "ncu rc=$?"; cp /tmp/ncu.log ${OUT:-/tmp}/ncu.log 2>/dev/null; tail -3 /tmp/ncu.log
fi
if want fuse; then   # fused ops: logits bit-equal with GLIM_CUDA_FUSE=0, tg128 both ways
    M=/tmp/m30.gguf   # the e2e model when e2e ran, else 16 Muse-shaped layers with a 16-token window
    if ! want e2e; then
        M=/tmp/mfuse.gguf
        $B/glim mkmodel --arch muse-glimmer --dim 6656 --layers 16 --heads 32 --kv-heads 2 --head-dim 128 \
            --ffn 4096 --window 16 --vocab 2000 --type Q4_K_M -o $M >/tmp/mkf.log 2>&1 || tail -2 /tmp/mkf.log
    fi
    ids=$(seq -s, 1 40)
    for kv in f16 f32; do
        for f in 1 0; do
            GLIM_CUDA_FUSE=$f timeout 120 $B/glim eval -q -m $M --device cuda --kv-type $kv --tokens $ids --chunk 7 \
                --generate 24 --logits-out /tmp/fuse$f.f32 >/dev/null 2>&1 || echo "eval GLIM_CUDA_FUSE=$f failed"
        done
        cmp -s /tmp/fuse1.f32 /tmp/fuse0.f32 && echo "fuse kv $kv: logits bit-equal" || echo "fuse kv $kv: LOGITS DIFFER"
    done
    for f in 1 0; do
        echo "== tg128 GLIM_CUDA_FUSE=$f"
        GLIM_CUDA_FUSE=$f timeout 100 $B/glim bench -m $M --device cuda -p 0 -n 128 -r 3 2>&1 | tail -2
    done
fi
echo "total $(( $(date +%s) - t0 )) s"
