#!/usr/bin/env bash
# glim info: a real model prints summary, metadata and tensor table (exit 0);
# broken files written here with head/printf give one line on stderr naming
# the file and exit 1; bad usage exits 2.
set -u
GLIM=${GLIM_BIN:?GLIM_BIN not set}
DATA=${GLIM_TESTDATA:?GLIM_TESTDATA not set}
MODEL=$DATA/models/stories260K.gguf
TMP=$(mktemp -d "${TMPDIR:-/tmp}/glim-info-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# ---- a real model --------------------------------------------------------
out=$("$GLIM" info -m "$MODEL" 2>"$TMP/err"); rc=$?
[ "$rc" -eq 0 ] || fail "info on stories260K: exit $rc ($(cat "$TMP/err"))"
grep -q '^version: *3$' <<<"$out" || fail "no version line"
grep -q '^tensors: *48$' <<<"$out" || fail "no tensor count 48"
grep -Eq '^  llama\.embedding_length +u32 +64$' <<<"$out" || fail "no embedding_length line"
grep -q 'tokenizer.ggml.tokens .*arr\[str\] *\[512\] <unk>, <s>, </s>, .*\.\.\.' <<<"$out" \
    || fail "token array not abbreviated as [512] <unk>, <s>, </s>, ..."
grep -Eq '^  token_embd\.weight +F32 +\[64, 512\] +131072$' <<<"$out" || fail "no token_embd row in tensor table"
grep -Eq '^  total +48 tensors' <<<"$out" || fail "no total line"
[ "$(grep -c '\.weight ' <<<"$out")" -eq 48 ] || fail "tensor table does not have 48 rows"

out=$("$GLIM" info -m "$MODEL" --tensors-only); rc=$?
[ "$rc" -eq 0 ] || fail "--tensors-only: exit $rc"
grep -q 'metadata:' <<<"$out" && fail "--tensors-only printed metadata"
grep -q 'token_embd.weight' <<<"$out" || fail "--tensors-only has no tensors"

out=$("$GLIM" info -m "$MODEL" --no-tensors); rc=$?
[ "$rc" -eq 0 ] || fail "--no-tensors: exit $rc"
grep -q 'token_embd.weight' <<<"$out" && fail "--no-tensors printed tensors"
grep -q 'general.architecture' <<<"$out" || fail "--no-tensors has no metadata"

# quantized model: types and per-type totals
out=$("$GLIM" info -m "$DATA/models/stories260K-Q4_0.gguf" --tensors-only); rc=$?
[ "$rc" -eq 0 ] || fail "Q4_0 model: exit $rc"
grep -Eq '^  Q4_0 +[0-9]+ tensors' <<<"$out" || fail "no Q4_0 total"

# default model (-m omitted), from another directory
out=$(cd "$TMP" && "$GLIM" info --no-tensors); rc=$?
[ "$rc" -eq 0 ] || fail "default model: exit $rc"
grep -q 'stories260K.gguf' <<<"$out" || fail "default model is not stories260K"

# ---- usage ---------------------------------------------------------------
"$GLIM" info --help >"$TMP/help" 2>&1 || fail "--help: nonzero exit"
grep -q 'usage: glim info' "$TMP/help" || fail "--help prints no usage"
"$GLIM" info --bogus >/dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "unknown option: exit $rc, want 2"
"$GLIM" info -m >/dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "-m without value: exit $rc, want 2"

# ---- broken files --------------------------------------------------------
: >"$TMP/empty.gguf"
head -c 100 "$MODEL" >"$TMP/cut-header.gguf"
head -c 500000 "$MODEL" >"$TMP/cut-data.gguf"
{ printf 'GGUX'; tail -c +5 "$MODEL"; } >"$TMP/bad-magic.gguf"
{ printf 'GGUF\001\000\000\000'; tail -c +9 "$MODEL"; } >"$TMP/version1.gguf"
{ printf 'GGUF\003\000\000\000\377\377\377\377\377\377\377\177'; tail -c +17 "$MODEL"; } >"$TMP/huge-count.gguf"
# kv 0's key length (offset 24) set to 2^56: runs past the end
{ head -c 24 "$MODEL"; printf '\000\000\000\000\000\000\000\001'; tail -c +33 "$MODEL"; } >"$TMP/huge-key.gguf"
for f in empty cut-header cut-data bad-magic version1 huge-count huge-key; do
    path=$TMP/$f.gguf
    "$GLIM" info -m "$path" >"$TMP/out" 2>"$TMP/err"; rc=$?
    [ "$rc" -eq 1 ] || fail "$f: exit $rc, want 1"
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "$f: stderr is not one line: $(cat "$TMP/err")"
    grep -qF "$path" "$TMP/err" || fail "$f: message does not name the file: $(cat "$TMP/err")"
    [ -s "$TMP/out" ] && fail "$f: printed to stdout"
    echo "$f: $(cat "$TMP/err")"
done
"$GLIM" info -m "$TMP/does-not-exist.gguf" >/dev/null 2>"$TMP/err"; rc=$?
[ "$rc" -eq 1 ] || fail "missing file: exit $rc, want 1"
grep -q 'does-not-exist.gguf' "$TMP/err" || fail "missing file: message does not name it"

if [ "$fails" -ne 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo "info.sh: all ok"
