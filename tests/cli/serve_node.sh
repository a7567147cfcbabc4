#!/usr/bin/env bash
# glim serve driven by the official OpenAI Node SDK and by the pi coding agent
# (tests/node/*.test.mjs). Needs `npm ci --prefix tests/node` first; skipped
# (exit 0, with a note) when node or tests/node/node_modules is missing.
set -euo pipefail
: "${GLIM_BIN:?}" "${GLIM_TESTDATA:?}" "${GLIM_SRC:?}"
DIR="$GLIM_SRC/tests/node"
if ! command -v node >/dev/null || [ ! -d "$DIR/node_modules/openai" ]; then
    echo "node or tests/node/node_modules missing (run: npm ci --prefix tests/node): skipped"; exit 0
fi
if ! "$GLIM_BIN" serve --help >/dev/null 2>&1; then echo "serve not in this build: skipped"; exit 0; fi
cd "$DIR"
export GLIM_BIN GLIM_TESTDATA
exec node --test --test-concurrency=1 openai.test.mjs pi.test.mjs
