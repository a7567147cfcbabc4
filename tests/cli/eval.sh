#!/usr/bin/env bash
# glim eval: logits file format and values (muse-glimmer-tiny, one chunk, chunks of
# 7, one by one), greedy ids of muse-glimmer-synth, and clear errors.
set -u
T=${GLIM_TESTDATA:?}; G=${GLIM_BIN:?}
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
M="$T/muse-glimmer-tiny/muse-glimmer-tiny.gguf"
maxabs() {   # maxabs A B: largest |a-b| over two little-endian f32 files of equal size
    python3 - "$1" "$2" <<'PY'
import array, sys
a = array.array('f'); a.frombytes(open(sys.argv[1], 'rb').read())
b = array.array('f'); b.frombytes(open(sys.argv[2], 'rb').read())
print(max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else 1e9)
PY
}
for mode in "--chunk 40" "--chunk 7" "--one-by-one"; do
    "$G" eval -m "$M" --tokens-file "$T/muse-glimmer-tiny/tokens.txt" $mode --kernels ref -q \
        --logits-out "$tmp/l.f32" 2>"$tmp/err"
    check "eval $mode exit 0" "[ \$? -eq 0 ]"
    check "eval $mode size" '[ "$(stat -c %s "$tmp/l.f32")" -eq 40960 ]'
    d=$(maxabs "$tmp/l.f32" "$T/muse-glimmer-tiny/logits_batch.f32")
    check "eval $mode logits within 1e-4 ($d)" "python3 -c 'import sys; sys.exit(0 if $d <= 1e-4 else 1)'"
done
check "prompt tok/s printed" 'grep -q "^prompt: 40 tokens" "$tmp/err"'
"$G" eval -m "$M" --tokens 1,2,3 -v 2>&1 >/dev/null | grep -q "memory plan"
check "memory plan printed" "[ \$? -eq 0 ]"
ids=$(python3 -c 'print(",".join(str((i*37+11)%256) for i in range(20)))')
out=$("$G" eval -m "$T/models/muse-glimmer-synth.gguf" --tokens "$ids" --generate 16 -q 2>/dev/null)
check "synth greedy ids" '[ "$out" = "generated: 74 137 207 41 196 237 237 86 20 60 135 193 42 151 126 233" ]'
# errors
"$G" eval -m "$M" --tokens 1,2,x >/dev/null 2>"$tmp/e"; rc=$?
check "bad ids exit 2" '[ $rc -eq 2 ] && grep -q "token ids" "$tmp/e"'
"$G" eval -m "$M" --tokens 1,2,3 --ctx 2 >/dev/null 2>"$tmp/e"; rc=$?
check "past the context end exits 1" '[ $rc -eq 1 ] && grep -q "context" "$tmp/e"'
"$G" eval -m "$M" --tokens 999 >/dev/null 2>"$tmp/e"; rc=$?
check "out-of-vocabulary id exits 1" '[ $rc -eq 1 ] && grep -q "token id 999" "$tmp/e"'
exit $fail
