#!/bin/bash
# glim mkmodel and glim bench through the CLI: the 30B dry run reports the
# published file's size, small models of each type load in `glim info`,
# --unique-rows keeps the file's size, the llama4 tokenizer is copied,
# bench/membw parse their options and print llama-bench's table and JSON
# fields; a DFlash drafter made --like the tiny target decodes exactly as the
# target alone. Env: GLIM_BIN, GLIM_TESTDATA.
set -u
fail=0
check() {   # check "what" command...
    local what=$1; shift
    if "$@"; then echo "ok    $what"; else echo "FAIL  $what"; fail=1; fi
}
tmp=$(mktemp -d /tmp/glim-cli-mkmodel-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# 1. the 30B preset: model.md §3.3 says the Q4_K_M mix is 16.92 GB; assert ±3 %
out=$("$GLIM_BIN" mkmodel --preset muse-glimmer-30b --dry-run)
check "30b dry run exits 0" test $? -eq 0
total=$(printf '%s\n' "$out" | awk '/^total:/ { for (i = 1; i < NF; i++) if ($(i + 1) == "bytes") print $i }')
check "30b total bytes printed" test -n "$total"
check "30b total within 3% of 16.92 GB" awk -v t="${total:-0}" 'BEGIN { exit !(t > 16.92e9 * 0.97 && t < 16.92e9 * 1.03) }'
check "30b has 731 tensors" grep -q "^total: 731 tensors" <<<"$out"
check "30b output is Q6_K" grep -Eq '^output.weight +Q6_K +\[6656, 202048\]' <<<"$out"
check "30b token_embd is Q4_K" grep -Eq '^token_embd.weight +Q4_K ' <<<"$out"
check "30b layer 6 attn_v is Q4_K" grep -Eq '^blk.6.attn_v.weight +Q4_K ' <<<"$out"
check "30b layer 8 ffn_down is Q6_K" grep -Eq '^blk.8.ffn_down.weight +Q6_K +\[19968, 6656\]' <<<"$out"

# 2. tiny muse-glimmer of each type: written, readable by glim info, types as asked
for t in F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K Q4_K_M Q5_K_M; do
    f="$tmp/tiny-$t.gguf"
    "$GLIM_BIN" mkmodel --arch muse-glimmer --dim 256 --heads 4 --kv-heads 2 --head-dim 64 --ffn 512 \
        --layers 4 --window 16 --vocab 256 --type "$t" --seed 3 -q -o "$f" >/dev/null
    check "mkmodel --type $t writes" test -s "$f"
    info=$("$GLIM_BIN" info -m "$f" 2>&1)
    check "glim info reads $t" test $? -eq 0
    base=${t%_M}
    check "$t: attn_q is $base" grep -Eq "blk.1.attn_q.weight +$base " <<<"$info"
done
info=$("$GLIM_BIN" info -m "$tmp/tiny-Q4_K_M.gguf")
check "Q4_K_M: output is Q6_K" grep -Eq "output.weight +Q6_K " <<<"$info"
check "Q4_K_M: layer 2 attn_v is Q6_K" grep -Eq "blk.2.attn_v.weight +Q6_K " <<<"$info"
check "Q4_K_M: layer 1 attn_v is Q4_K" grep -Eq "blk.1.attn_v.weight +Q4_K " <<<"$info"
cmp -s "$tmp/tiny-F32.gguf" <("$GLIM_BIN" mkmodel --arch muse-glimmer --dim 256 --heads 4 --kv-heads 2 \
    --head-dim 64 --ffn 512 --layers 4 --window 16 --vocab 256 --type F32 --seed 3 -t 1 -q -o "$tmp/again.gguf" \
    >/dev/null; cat "$tmp/again.gguf")
check "same seed, other thread count: identical file" test $? -eq 0

# --unique-rows: the same size and tensor table, a loadable file, and not the full fill's bytes
"$GLIM_BIN" mkmodel --arch muse-glimmer --dim 256 --heads 4 --kv-heads 2 --head-dim 64 --ffn 512 \
    --layers 4 --window 16 --vocab 256 --type Q4_K_M --seed 3 --unique-rows 8 -q -o "$tmp/u.gguf" >/dev/null
check "--unique-rows writes" test -s "$tmp/u.gguf"
check "--unique-rows: same size as the full file" test "$(stat -c %s "$tmp/u.gguf")" -eq "$(stat -c %s "$tmp/tiny-Q4_K_M.gguf")"
check "--unique-rows: other bytes" bash -c "! cmp -s '$tmp/u.gguf' '$tmp/tiny-Q4_K_M.gguf'"
info=$("$GLIM_BIN" info -m "$tmp/u.gguf" 2>&1)
check "--unique-rows: glim info reads it" test $? -eq 0
check "--unique-rows: output is Q6_K" grep -Eq "output.weight +Q6_K " <<<"$info"
"$GLIM_BIN" mkmodel --arch llama --unique-rows 0 --dry-run 2>"$tmp/err"; rc=$?
check "mkmodel --unique-rows 0 exits 2" test $rc -eq 2

# 3. the llama4 tokenizer is copied (202048 tokens)
"$GLIM_BIN" mkmodel --arch llama --dim 64 --heads 2 --kv-heads 1 --ffn 128 --layers 1 --vocab llama4 \
    --type F16 -q -o "$tmp/l4.gguf" >/dev/null
info=$("$GLIM_BIN" info -m "$tmp/l4.gguf")
check "llama4 vocab: tokenizer.ggml.pre copied" grep -q "tokenizer.ggml.pre.*llama4" <<<"$info"
check "llama4 vocab: token_embd has 202048 rows" grep -Eq "token_embd.weight +F16 +\[64, 202048\]" <<<"$info"

# 4. usage errors exit 2 with a message naming the flag
"$GLIM_BIN" mkmodel --type Q3_K --dry-run 2>"$tmp/err"; rc=$?
check "mkmodel bad --type exits 2" test $rc -eq 2
check "mkmodel bad --type names the flag" grep -q -- "--type" "$tmp/err"
"$GLIM_BIN" mkmodel --arch llama --ffn 172 --type Q8_0 --dry-run 2>"$tmp/err"; rc=$?
check "mkmodel bad shape exits 2" test $rc -eq 2
check "mkmodel bad shape names the tensor" grep -q "ffn_down" "$tmp/err"
check "mkmodel --help" "$GLIM_BIN" mkmodel --help >/dev/null
check "bench --help" "$GLIM_BIN" bench --help >/dev/null
"$GLIM_BIN" bench -p x 2>/dev/null; check "bench bad -p exits 2" test $? -eq 2
"$GLIM_BIN" bench --device tpu 2>/dev/null; check "bench bad --device exits 2" test $? -eq 2

# 5. membw on a small buffer, and a tiny bench in both formats
out=$("$GLIM_BIN" bench --membw --membw-mib 16 -r 2 -t 2)
check "membw prints a bandwidth" grep -Eq "^memory read bandwidth: [0-9.]+ GB/s" <<<"$out"
m="$tmp/tiny-Q8_0.gguf"
out=$("$GLIM_BIN" bench -m "$m" -p 16 -n 4 -d 8 -r 2 -t 1)
check "bench table header" grep -Eq '^\| model +\| +size \| +params \| backend +\| threads \| +test \| +t/s \|$' <<<"$out"
check "bench pp16 @ d8 row" grep -q "pp16 @ d8 |" <<<"$out"
check "bench tg4 @ d8 row" grep -q "tg4 @ d8 |" <<<"$out"
out=$("$GLIM_BIN" bench -m "$m" -p 8 -n 2 -r 2 -t 1 --json)
for k in model_filename model_type model_size model_n_params backends n_threads n_prompt n_gen n_depth \
         avg_ns stddev_ns avg_ts stddev_ts samples_ts; do
    check "bench json has $k" grep -q "\"$k\":" <<<"$out"
done
check "bench json without --greedy has no greedy field" bash -c '! grep -q "\"greedy\"" <<<"$1"' _ "$out"
# --greedy: tg steps pick their own tokens (glim_session_greedy); pp rows stay as they were
out=$("$GLIM_BIN" bench -m "$m" -p 8 -n 4 -d 8 -r 2 -t 1 --greedy)
check "bench --greedy tg row" grep -q "tg4 greedy @ d8 |" <<<"$out"
check "bench --greedy pp row" grep -q "pp8 @ d8 |" <<<"$out"
out=$("$GLIM_BIN" bench -m "$m" -p 0 -n 4 -r 2 -t 1 --greedy --json)
check "bench --greedy json" grep -q '"greedy": true' <<<"$out"
# 6. dflash: the 30B drafter preset (runtime.md §1.1-1.2), and a random drafter --like the tiny
# target that must not change greedy output (lossless)
out=$("$GLIM_BIN" mkmodel --arch dflash --preset dflash-muse-glimmer-30b --dry-run)
check "dflash 30b dry run exits 0" test $? -eq 0
check "dflash 30b: 58 tensors, 1438020608 bytes" grep -q "^total: 58 tensors, .* 1438020608 bytes" <<<"$out"
check "dflash 30b: fc is Q4_K [33280, 6656]" grep -Eq '^fc.weight +Q4_K +\[33280, 6656\]' <<<"$out"
check "dflash 30b: attn_k [6656, 1024]" grep -Eq '^blk.4.attn_k.weight +Q4_K +\[6656, 1024\]' <<<"$out"
check "dflash 30b: taps 2,14,26,38,50" grep -q "target_layers 2,14,26,38,50" <<<"$out"
check "dflash 30b: no token_embd" bash -c '! grep -q token_embd <<<"$1"' _ "$out"
tiny="$GLIM_TESTDATA/muse-glimmer-tiny/muse-glimmer-tiny.gguf"
d="$tmp/draft.gguf"
"$GLIM_BIN" mkmodel --arch dflash --like "$tiny" --seed 9 --layers 2 --block-size 8 -q -o "$d" >/dev/null
check "dflash --like writes" test -s "$d"
info=$("$GLIM_BIN" info -m "$d" 2>&1)
check "dflash --like: taps 1,2,3 as INT32" grep -Eq 'dflash.target_layers +arr\[i32\] +\[3\] 1, 2, 3' <<<"$info"
check "dflash --like: block_size 8" grep -Eq 'dflash.block_size +u32 +8$' <<<"$info"
check "dflash --like: mask = last id" grep -Eq 'tokenizer.ggml.mask_token_id +u32 +255$' <<<"$info"
check "dflash --like: no_vocab copied" grep -Eq 'tokenizer.ggml.model +str +no_vocab' <<<"$info"
want=$("$GLIM_BIN" eval -m "$tiny" --tokens 1,2,3,4 --generate 16 --ctx 256 2>/dev/null | grep '^generated:')
got=$("$GLIM_BIN" eval -m "$tiny" --tokens 1,2,3,4 --draft "$d" --generate 16 --ctx 256 2>/dev/null | grep '^generated:')
check "dflash: 16 ids generated" test "$(wc -w <<<"$want")" -eq 17
check "dflash --like drafter is lossless" test -n "$got" -a "$got" = "$want"
"$GLIM_BIN" mkmodel --like "$tiny" --window 4 --type Q8_0 -q -o "$tmp/draft-swa.gguf" >/dev/null
got=$("$GLIM_BIN" eval -m "$tiny" --tokens 1,2,3,4 --draft "$tmp/draft-swa.gguf" --generate 16 --ctx 256 \
    2>/dev/null | grep '^generated:')
check "dflash sliding Q8_0 drafter is lossless" test -n "$got" -a "$got" = "$want"
"$GLIM_BIN" mkmodel --like "$tiny" --dim 128 --dry-run 2>"$tmp/err"; rc=$?
check "dflash --like --dim mismatch exits 2" test $rc -eq 2
"$GLIM_BIN" mkmodel --like "$tiny" --target-layers 1,4 --dry-run 2>"$tmp/err"; rc=$?
check "dflash tap past the target exits 2" test $rc -eq 2
check "dflash tap error names the flag" grep -q -- "--target-layers" "$tmp/err"
exit $fail
