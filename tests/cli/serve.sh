#!/usr/bin/env bash
# glim serve on a free loopback port, driven with curl: health, models,
# chat (non-stream and SSE), usage, stop, errors, tools (test-output mode),
# the API key, sessions. The server is killed on exit, even on failure.
set -euo pipefail
: "${GLIM_BIN:?}" "${GLIM_TESTDATA:?}"
if ! "$GLIM_BIN" serve --help >/dev/null 2>&1; then echo "serve not in this build: skipped"; exit 0; fi
command -v curl >/dev/null || { echo "curl missing: skipped"; exit 0; }
TMP=$(mktemp -d); PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- server log"; cat "$TMP/log"; exit 1; }

start() {   # start ARGS...: sets PORT
    "$GLIM_BIN" serve -m "$GLIM_TESTDATA/models/stories260K.gguf" --port 0 --threads 1 "$@" >"$TMP/log" 2>&1 &
    PID=$!
    for _ in $(seq 1 100); do
        PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$TMP/log")
        [ -n "$PORT" ] && curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && return 0
        kill -0 "$PID" 2>/dev/null || fail "server exited"
        sleep 0.1
    done
    fail "no /health"
}
post() { curl -s -w '\n%{http_code}' "http://127.0.0.1:$PORT$1" -H 'Content-Type: application/json' "${@:3}" -d "$2"; }
expect() {  # expect NAME WANT_CODE GREP_PATTERN  (reads the answer on stdin)
    local out code; out=$(cat); code=${out##*$'\n'}
    [ "$code" = "$2" ] || fail "$1: status $code, want $2: $out"
    grep -q -- "$3" <<<"$out" || fail "$1: no '$3' in: $out"
}

printf '%s' ' to=self<|message|>Thinking.<|eom|><|start|>assistant to=get_weather<|message|><atem:function_calls>
<atem:invoke name="get_weather">
<atem:parameter name="city">Paris</atem:parameter>
</atem:invoke>
</atem:function_calls><|eom|>' >"$TMP/script"
start --model-id tiny --max-sessions 4 --max-context 256 --test-mode
"$GLIM_BIN" serve --help | grep -q -- '--draft FILE' || fail "--help lacks --draft"

curl -s "http://127.0.0.1:$PORT/v1/models" | grep -q '"id":"tiny"' || fail models
U='{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":8'
post /v1/chat/completions "$U}" | expect chat 200 '"completion_tokens":8,"total_tokens":'
post /v1/chat/completions "$U,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" >"$TMP/sse"
grep -q '^data: {.*"delta":{"role":"assistant"' "$TMP/sse" || fail "stream role"
grep -q '"choices":\[\],"usage":{' "$TMP/sse" || fail "stream usage"
grep -q '^data: \[DONE\]' "$TMP/sse" || fail "stream done"
post /v1/chat/completions "$U,\"stop\":[\"girl\"]}" | expect stop 200 '"finish_reason":"stop"'
post /v1/chat/completions "$U,\"stop\":[\"girl\"]}" | grep -q 'girl' && fail "stop text leaked"
post /v1/completions '{"prompt":"Once upon a time","max_tokens":4}' | expect completions 200 '"object":"text_completion"'
post /tokenize '{"content":"Once upon a time"}' | expect tokenize 200 '"tokens":\['
post /detokenize '{"tokens":[403,407]}' | expect detokenize 200 '"content"'

# errors answer 4xx with an OpenAI error object, and the server keeps serving
post /v1/chat/completions '{"messages":' | expect badjson 400 '"error":{"message":'
post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"temperature":9}' | expect range 400 'invalid_value'
post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"model":"other"}' | expect model 404 'model_not_found'
post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"$(head -c 3000 /dev/zero | tr '\0' 'a' | sed 's/a/a b /g')\"}]}" \
    | expect context 400 'context_length_exceeded'

# tools through the whole path: reasoning routed, ATEM → tool_calls
T='"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]'
S=$(jq -Rs . <"$TMP/script")
post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],$T,\"glim_test_output\":$S,\"chat_template_kwargs\":{\"return_reasoning\":true}}" \
    >"$TMP/tc"
expect tools 200 '"finish_reason":"tool_calls"' <"$TMP/tc"
grep -q '"reasoning_content":"Thinking."' "$TMP/tc" || fail "reasoning: $(cat "$TMP/tc")"
grep -q '"arguments":"{\\"city\\": \\"Paris\\"}"' "$TMP/tc" || fail "arguments: $(cat "$TMP/tc")"
post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],$T,\"glim_test_output\":$S,\"stream\":true}" >"$TMP/tcs"
grep -q '"tool_calls":\[{"index":0,"id":"call-[0-9a-f]*","type":"function","function":{"name":"get_weather","arguments":""}}\]' "$TMP/tcs" \
    || fail "streamed call start: $(cat "$TMP/tcs")"
grep -q 'atem' "$TMP/tcs" && fail "markup leaked into the stream"

# sessions: second turn reuses the first turn's tokens
post /v1/chat/completions "$U,\"session_id\":\"s1\"}" >/dev/null
post /v1/chat/completions '{"messages":[{"role":"user","content":"Once upon a time"},{"role":"user","content":"More"}],"max_tokens":2}' \
    -H 'x-session-affinity: s1' | expect session 200 '"cached_tokens":[1-9]'
curl -s -X DELETE "http://127.0.0.1:$PORT/v1/sessions/s1" | grep -q '"closed":true' || fail "session delete"
curl -s "http://127.0.0.1:$PORT/metrics" | grep -q '^glim_prefill_tokens_total [1-9]' || fail metrics
kill "$PID"; wait "$PID" 2>/dev/null || true; PID=

# --api-key
start --api-key sekrit
post /v1/models '' -X GET | expect noauth 401 'invalid_api_key'
curl -sf "http://127.0.0.1:$PORT/v1/models" -H 'Authorization: Bearer sekrit' >/dev/null || fail "auth"
echo "serve.sh: ok"
