#!/usr/bin/env bash
# Re-checks, against a real llama-cpp-python server, what tests/fixtures/providers/
# llama-cpp-python.json says of it (the recorded exchange the test suite replays, which was
# reconstructed from the server's source), then runs a task through it with tollgate.
#
#   scripts/llama-cpp-python-check.sh MODEL.gguf     # starts the server on 127.0.0.1
#   LLAMA_CPP_URL=http://127.0.0.1:8000/v1 scripts/llama-cpp-python-check.sh
#                                                    # one already running, started with
#                                                    # --chat_format chatml-function-calling
#
# Needs `pip install 'llama-cpp-python[server]'` (it compiles llama.cpp: about 13 minutes on
# 2 cores) and a small chat GGUF (Gemma 3 270M was the one issue 48 used), curl, jq, and
# tollgate (TOLLGATE_BIN, else target/debug/tollgate, else `cargo run`). Everything stays on
# 127.0.0.1. What each probe sent and got is kept in the output folder it names at the end.
# Exit 0 when the server still behaves as recorded and tollgate's run ended without a
# provider error; the model's own choices (a 270M model may not call the tool) are shown,
# not judged.
set -euo pipefail
cd "$(dirname "$0")/.."

out="$(mktemp -d "${TMPDIR:-/tmp}/llama-cpp-python-check.XXXXXX")"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
}
trap cleanup EXIT

url="${LLAMA_CPP_URL:-}"
if [ -z "$url" ]; then
  model="${1:?usage: $0 MODEL.gguf (or set LLAMA_CPP_URL)}"
  python3 -c 'import llama_cpp.server' 2>/dev/null || {
    echo "llama-cpp-python's server is not installed: pip install 'llama-cpp-python[server]'" >&2
    exit 2
  }
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  python3 -m llama_cpp.server --model "$model" --chat_format chatml-function-calling \
    --host 127.0.0.1 --port "$port" >"$out/server.log" 2>&1 &
  server_pid=$!
  url="http://127.0.0.1:$port/v1"
  for _ in $(seq 1 240); do
    curl -sf "$url/models" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$out/server.log" >&2; exit 1; }
    sleep 0.5
  done
fi
echo "server: $url"

tools='[{"type":"function","function":{"name":"Read","description":"Reads a file","parameters":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}}}]'
user='{"role":"user","content":"Read notes.txt."}'
call='{"id":"call_1","type":"function","function":{"name":"Read","arguments":"{\"file_path\":\"notes.txt\"}"}}'
result='{"role":"tool","tool_call_id":"call_1","content":"the build is green"}'
failed=0
# probe NAME BODY: posts BODY, keeps the status and body, prints both.
probe() {
  local status
  : >"$out/$1.body"
  status="$(curl -s -o "$out/$1.body" -w '%{http_code}' -H 'content-type: application/json' \
    --max-time 300 -d "$2" "$url/chat/completions" || true)"
  printf '%s' "$2" >"$out/$1.request.json"
  echo "$status" >"$out/$1.status"
  echo "$1: HTTP $status, $(wc -c <"$out/$1.body") bytes"
}
expect() { # NAME WHAT CONDITION...
  local name="$1" what="$2"; shift 2
  if "$@"; then echo "  as recorded: $what"; else echo "  CHANGED: $what" >&2; failed=1; fi
}

probe stream-auto "{\"model\":\"m\",\"stream\":true,\"tool_choice\":\"auto\",\"tools\":$tools,\"messages\":[$user]}"
expect stream-auto "stream + tool_choice auto is an empty HTTP 200" \
  test "$(cat "$out/stream-auto.status")" = 200 -a ! -s "$out/stream-auto.body"

probe null-content "{\"model\":\"m\",\"stream\":false,\"tool_choice\":\"auto\",\"tools\":$tools,\"messages\":[$user,{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[$call]},$result]}"
expect null-content "assistant content null is HTTP 500 internal_server_error" \
  sh -c "test \"\$(cat '$out/null-content.status')\" = 500 && jq -e '.error.type == \"internal_server_error\"' '$out/null-content.body' >/dev/null"

probe empty-content "{\"model\":\"m\",\"stream\":false,\"tool_choice\":\"auto\",\"tools\":$tools,\"messages\":[$user,{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[$call]},$result]}"
expect empty-content "assistant content \"\" is taken" \
  test "$(cat "$out/empty-content.status")" = 200

probe whole-auto "{\"model\":\"m\",\"stream\":false,\"tool_choice\":\"auto\",\"tools\":$tools,\"messages\":[$user]}"
expect whole-auto "stream false + tool_choice auto is a chat.completion with usage" \
  sh -c "jq -e '.object == \"chat.completion\" and (.usage.prompt_tokens | type) == \"number\"' '$out/whole-auto.body' >/dev/null"
echo "  the model chose: $(jq -c '.choices[0].message | {content, tool_calls: [.tool_calls[]?.function]}' "$out/whole-auto.body")"

# The same task the suite runs against the recording, through tollgate.
mkdir -p "$out/run/ws"
echo "the build is green" >"$out/run/ws/notes.txt"
cat >"$out/run/task.yaml" <<EOF
version: 1
name: llama-cpp-python-check
prompt: Read notes.txt and summarise it.
workdir: ws
mode: dontAsk
tools: [Read, Glob, Grep]
model:
  provider: openai
  name: local
  max_tokens: 256
  base_url: $url
  pricing: {input: 0, output: 0}
  retries: {max: 1}
limits: {max_turns: 4}
EOF
if [ -n "${TOLLGATE_BIN:-}" ]; then tollgate=("$TOLLGATE_BIN")
elif [ -x target/debug/tollgate ]; then tollgate=("$PWD/target/debug/tollgate")
else tollgate=(cargo run -q --manifest-path "$PWD/Cargo.toml" --)
fi
code=0
(cd "$out/run" && "${tollgate[@]}" run task.yaml --out out -q) >"$out/run/stdout" 2>"$out/run/stderr" || code=$?
transcript="$out/run/out/transcript.jsonl"
echo "tollgate: exit $code, outcome $(jq -r 'select(.type=="run_finished").outcome' "$transcript")"
echo "  streaming_off: $(jq -c 'select(.type=="streaming_off") | .reason' "$transcript")"
echo "  tool calls: $(jq -c 'select(.type=="tool_call") | {tool, input}' "$transcript" | tr '\n' ' ')"
expect run "tollgate switched to whole responses once" \
  test "$(jq -c 'select(.type=="streaming_off")' "$transcript" | wc -l)" = 1
expect run "the run ended without a provider error" test "$code" != 4
echo "exchanges and the run: $out"
exit "$failed"
