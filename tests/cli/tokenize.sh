#!/bin/bash
# glim tokenize: ids, --pieces, --special vs user text, --tokenizer, exit codes.
# Env: GLIM_BIN (the CLI), GLIM_TESTDATA.
set -u
fail=0
check() {   # check NAME WANT GOT
    if [ "$2" != "$3" ]; then
        echo "FAIL $1: want '$2', got '$3'" >&2
        fail=1
    else
        echo "ok   $1"
    fi
}
if ! "$GLIM_BIN" tokenize --help >/dev/null 2>&1 && "$GLIM_BIN" tokenize --help 2>&1 | grep -q "not part of this build"; then
    echo "skipped: built without text room"
    exit 0
fi
V="$GLIM_TESTDATA/vocab"
L4="$V/ggml-vocab-llama4.gguf"

check help-exit 0 "$("$GLIM_BIN" tokenize --help >/dev/null; echo $?)"
check usage-exit 2 "$("$GLIM_BIN" tokenize --nope 2>/dev/null; echo $?)"
check no-text-exit 2 "$("$GLIM_BIN" tokenize 2>/dev/null; echo $?)"
check missing-model-exit 1 "$("$GLIM_BIN" tokenize -m /nonexistent.gguf -p x 2>/dev/null; echo $?)"
check no-vocab-exit 1 "$("$GLIM_BIN" tokenize -m "$GLIM_TESTDATA/models/muse-glimmer-synth.gguf" -p x 2>/dev/null; echo $?)"

# default model (stories260K, SPM): BOS only with --add-special (goldens/stories260K.greedy64.txt)
check default-add-special "1 403 407 261 378" "$("$GLIM_BIN" tokenize -p "Once upon a time" --add-special)"
check default-plain "403 407 261 378" "$("$GLIM_BIN" tokenize -p "Once upon a time")"

# vectors: "Hello world" is test 11 (0-based) of the shared .inp, line 12 of the .out
check llama-bpe "$(sed -n 12p "$V/ggml-vocab-llama-bpe.gguf.out" | sed 's/^ *//')" \
    "$("$GLIM_BIN" tokenize -m "$V/ggml-vocab-llama-bpe.gguf" -p "Hello world")"
check llama3-json "$(sed -n 12p "$V/ggml-vocab-llama-bpe.gguf.out" | sed 's/^ *//')" \
    "$("$GLIM_BIN" tokenize --tokenizer "$GLIM_TESTDATA/tokenizers/llama3/tokenizer.json" -p "Hello world")"

# control tokens: text from -p is user text unless --special
check eot-special "200008" "$("$GLIM_BIN" tokenize -m "$L4" -p "<|eot|>" --special)"
plain=$("$GLIM_BIN" tokenize -m "$L4" -p "<|eot|>")
check eot-as-text 1 "$([ "$(echo "$plain" | wc -w)" -gt 1 ] && ! echo " $plain " | grep -q " 200008 " && echo 1)"
check muse-start "200000 200022 1556 200023" \
    "$("$GLIM_BIN" tokenize -m "$L4" --muse-glimmer-vocab --special --add-special -p "<|start|>user<|message|>")"

# --pieces: ID<TAB>'bytes', escapes
check pieces "$(printf "19873\t'Hello'\n3817\t' world'\n198\t'\\\\n'")" \
    "$("$GLIM_BIN" tokenize -m "$L4" --pieces -p "Hello world
")"

# -f reads bytes as they are
tmp=$(mktemp)
printf 'Hello world' >"$tmp"
check file-input "19873 3817" "$("$GLIM_BIN" tokenize -m "$L4" -f "$tmp")"
rm -f "$tmp"
exit $fail
