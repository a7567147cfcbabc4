#!/usr/bin/env bash
# glim run: the golden greedy text of stories260K, the embedded default model,
# DFlash output equal to plain greedy output, and clear errors on bad input.
set -u
T=${GLIM_TESTDATA:?}; G=${GLIM_BIN:?}
# glim run needs the text room (PCRE2 + jansson); the GPU machine's build has no -dev libraries
if "$G" run --help 2>&1 | grep -q "not part of this build"; then echo "run not in this build: skipped"; exit 0; fi
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# the golden text: everything after the prompt, 64 greedy tokens; it holds a
# newline, so it runs from "gen_text=" to the line before "logits_file:"
want_text=$(sed -n '/^gen_text=/,/^logits_file:/p' "$T/goldens/stories260K.greedy64.txt" | sed '$d' | sed '1s/^gen_text=//')
"$G" run -m "$T/models/stories260K.gguf" -p "Once upon a time" -n 64 --temp 0 >"$tmp/out" 2>"$tmp/err"
check "exit 0" "[ \$? -eq 0 ]"
got=$(cat "$tmp/out")
check "golden text" '[ "$got" = "$want_text" ]'
check "prompt tokens line" 'grep -q "^Prompt tokens: 5$" "$tmp/err"'
check "stats line" 'grep -q "decode .* tok/s" "$tmp/err" && grep -q "time to first token" "$tmp/err"'

# the embedded default model with no arguments at all prints real text
(cd "$tmp" && "$G" run -n 16 --temp 0 >"$tmp/def" 2>/dev/null)
check "default model" 'grep -q "there was" "$tmp/def"'

# DFlash: same greedy tokens with and without the draft
M="$T/glimmer-tiny/glimmer-tiny-F32.gguf"; D="$T/glimmer-tiny/dflash/glimmer-tiny-dflash-BF16.gguf"
"$G" run -m "$M" -p "Once upon a time" -n 24 --temp 0 >"$tmp/plain" 2>/dev/null
"$G" run -m "$M" -p "Once upon a time" -n 24 --temp 0 --draft "$D" --block-length 4 >"$tmp/spec" 2>"$tmp/spec.err"
check "dflash output equals plain" 'cmp -s "$tmp/plain" "$tmp/spec"'
check "dflash timing line" 'grep -q "^DFlashDecodeTiming {" "$tmp/spec.err"'

# errors: clear message, exit codes
"$G" run -m "$tmp/missing.gguf" -p x >/dev/null 2>"$tmp/e1"; rc=$?
check "missing model exits 1" '[ $rc -eq 1 ] && grep -q "missing.gguf" "$tmp/e1"'
"$G" run --temp 7 >/dev/null 2>"$tmp/e2"; rc=$?
check "bad --temp exits 2" '[ $rc -eq 2 ] && grep -q -- "--temp" "$tmp/e2"'
"$G" run -m "$M" --draft "$M" -p x -n 2 >/dev/null 2>"$tmp/e3"; rc=$?
check "target as draft is refused" '[ $rc -eq 1 ] && grep -q "dflash" "$tmp/e3"'
exit $fail
