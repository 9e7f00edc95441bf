#!/usr/bin/env bash
# tollgate's own time per repository in a batch, and its fsync calls: N one-commit
# repositories, the scripted model (no network), `--jobs 1`, each binary given run in turn
# ROUNDS times (interleaved, so load drifts hit all alike). Prints per binary the wall time
# per repository, the same git steps run by a shell loop (worktree add, commit, format-patch),
# and, with strace on PATH, the fsync/fdatasync calls per repository.
#   benches/batch.sh N ROUNDS BINARY...
set -euo pipefail
count=${1:-20}; rounds=${2:-3}; shift 2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cat > "$work/task.yaml" <<'TASK'
version: 1
name: note {{ repo.name }}
prompt: add a note to {{ repo.name }}
mode: acceptEdits
tools: [Write]
batch:
  branch: fix/{{ repo.name }}
  commit_message: "add NOTE.md to {{ repo.name }}"
model:
  provider: scripted
  name: batch-script
  script:
    - - tool_use: {name: Write, input: {file_path: NOTE.md, content: "ok {{ repo.name }}\n"}}
    - - text: done
TASK
: > "$work/repos.yaml"
for n in $(seq -w 1 "$count"); do
  git init -q "$work/r$n"; echo "r$n" > "$work/r$n/README"
  git -C "$work/r$n" add README
  git -C "$work/r$n" -c user.name=b -c user.email=b@example.com commit -qm init
  echo "- repo: r$n" >> "$work/repos.yaml"
done
now() { date +%s.%N; }
git_loop() {
  for n in $(seq -w 1 "$count"); do
    local wt="$work/git-$1/r$n"
    git -C "$work/r$n" worktree add -q -b "loop-$1-$n" "$wt" HEAD
    echo "ok r$n" > "$wt/NOTE.md"; git -C "$wt" add NOTE.md
    git -C "$wt" -c user.name=b -c user.email=b@example.com commit -qm note
    git -C "$wt" format-patch -q -1 --stdout > /dev/null
  done
}
for round in $(seq 1 "$rounds"); do
  start=$(now); git_loop "$round"; end=$(now)
  echo "round $round: git steps alone: $(echo "($end - $start) * 1000 / $count" | bc -l | xargs printf '%.1f') ms per repository"
  for bin in "$@"; do
    out="$work/out-$round-$(basename "$bin")"
    start=$(now)
    (cd "$work" && "$bin" batch task.yaml --repos repos.yaml --out "$out" --jobs 1 > /dev/null 2>&1) || true
    end=$(now)
    echo "round $round: $bin: $(echo "($end - $start) * 1000 / $count" | bc -l | xargs printf '%.1f') ms per repository"
  done
done
if command -v strace > /dev/null; then
  for bin in "$@"; do
    out="$work/out-strace-$(basename "$bin")"
    calls=$(cd "$work" && strace -f -c -e trace=fsync,fdatasync,syncfs "$bin" batch task.yaml --repos repos.yaml --out "$out" --jobs 1 2>&1 >/dev/null | awk '/fsync|fdatasync|syncfs/ {sum += $4} END {print sum + 0}' || true)
    echo "$bin: $calls fsync/fdatasync calls, $(echo "$calls / $count" | bc -l | xargs printf '%.1f') per repository (git's own included)"
  done
fi
