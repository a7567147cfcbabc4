#!/usr/bin/env bash
# glim quantize: F32 glimmer-tiny -> Q4_K_M / Q8_0 / --pure; the per-tensor
# types follow llama.cpp's rules (checked through `glim info`), the file type
# key is set, and bad arguments give the documented exit codes.
set -u
BIN=${GLIM_BIN:?} SRC=${GLIM_TESTDATA:?}/glimmer-tiny/glimmer-tiny-F32.gguf
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
check() {   # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
type_of() {   # type_of FILE TENSOR -> type column of `glim info`
    "$BIN" info -m "$1" --tensors-only | awk -v n="$2" '$1 == n { print $2 }'
}
key_of() {
    "$BIN" info -m "$1" --no-tensors | awk -v k="$2" '$1 == k { print $3 }'
}

"$BIN" quantize "$SRC" "$TMP/q4km.gguf" Q4_K_M --threads 2 > "$TMP/q4km.txt" 2> "$TMP/q4km.err"
check "quantize Q4_K_M exits 0" test $? -eq 0
check "blk.0.attn_v is Q6_K" test "$(type_of "$TMP/q4km.gguf" blk.0.attn_v.weight)" = Q6_K
check "blk.1.attn_v is Q4_K" test "$(type_of "$TMP/q4km.gguf" blk.1.attn_v.weight)" = Q4_K
check "blk.3.ffn_down is Q6_K" test "$(type_of "$TMP/q4km.gguf" blk.3.ffn_down.weight)" = Q6_K
check "blk.4.ffn_down is Q4_K" test "$(type_of "$TMP/q4km.gguf" blk.4.ffn_down.weight)" = Q4_K
check "blk.7.attn_v is Q6_K" test "$(type_of "$TMP/q4km.gguf" blk.7.attn_v.weight)" = Q6_K
check "blk.1.attn_q is Q4_K" test "$(type_of "$TMP/q4km.gguf" blk.1.attn_q.weight)" = Q4_K
check "token_embd is Q4_K" test "$(type_of "$TMP/q4km.gguf" token_embd.weight)" = Q4_K
check "output is Q6_K" test "$(type_of "$TMP/q4km.gguf" output.weight)" = Q6_K
check "norms stay F32" test "$(type_of "$TMP/q4km.gguf" blk.2.ffn_norm.weight)" = F32
check "q_norm stays F32" test "$(type_of "$TMP/q4km.gguf" blk.2.attn_q_norm.weight)" = F32
check "general.file_type = 15" test "$(key_of "$TMP/q4km.gguf" general.file_type)" = 15
check "metadata copied" test "$(key_of "$TMP/q4km.gguf" muse-glimmer.block_count)" = 8
n_q6=$("$BIN" info -m "$TMP/q4km.gguf" --tensors-only | awk '$2 == "Q6_K"' | wc -l)
check "9 Q6_K tensors, as llama.cpp's file" test "$n_q6" -eq 9
check "same size as llama.cpp's Q4_K_M" test "$(stat -c %s "$TMP/q4km.gguf")" -eq \
    "$(stat -c %s "$GLIM_TESTDATA/glimmer-tiny/glimmer-tiny-Q4_K_M.gguf")"
check "RMSE table has totals" grep -q '^total: ' "$TMP/q4km.txt"
check "RMSE table row for attn_v" grep -Eq '^blk\.0\.attn_v\.weight +F32 +Q6_K ' "$TMP/q4km.txt"

"$BIN" quantize "$SRC" "$TMP/pure.gguf" Q4_K --pure --quiet > "$TMP/pure.txt"
check "--pure exits 0" test $? -eq 0
check "--pure: attn_v is Q4_K" test "$(type_of "$TMP/pure.gguf" blk.0.attn_v.weight)" = Q4_K
check "--pure: output is Q4_K" test "$(type_of "$TMP/pure.gguf" output.weight)" = Q4_K
check "--quiet prints nothing" test ! -s "$TMP/pure.txt"

"$BIN" quantize "$SRC" "$TMP/q8.gguf" q8_0 --quiet
check "Q8_0: output is Q8_0" test "$(type_of "$TMP/q8.gguf" output.weight)" = Q8_0
check "Q8_0: general.file_type = 7" test "$(key_of "$TMP/q8.gguf" general.file_type)" = 7

"$BIN" quantize --help > "$TMP/help.txt"
check "--help exits 0" test $? -eq 0
check "--help lists Q5_K_M" grep -q Q5_K_M "$TMP/help.txt"
"$BIN" quantize "$SRC" "$TMP/x.gguf" IQ2_XS 2> /dev/null
check "unknown TYPE exits 2" test $? -eq 2
"$BIN" quantize "$SRC" 2> /dev/null
check "missing OUT exits 2" test $? -eq 2
"$BIN" quantize "$SRC" "$TMP/x.gguf" Q6_K --threads 0 2> /dev/null
check "--threads 0 exits 2" test $? -eq 2
"$BIN" quantize "$TMP/missing.gguf" "$TMP/x.gguf" Q6_K 2> /dev/null
check "missing input exits 1" test $? -eq 1
check "no output left behind" test ! -e "$TMP/x.gguf"
exit $fail
