#!/usr/bin/env bash
# tollgate's own time per repository in a batch, and its fsync calls: N one-commit
# repositories, the scripted model (no network), `--jobs 1`, each binary given run in turn
# ROUNDS times (interleaved, so load drifts hit all alike). Prints per binary the wall time
# per repository, the same git steps run by a shell loop (worktree add, commit, format-patch),
# tollgate's own CPU time (python3), and, with strace on PATH, the fsync/fdatasync calls per
# repository.
#   benches/batch.sh N ROUNDS BINARY...   (absolute paths)
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
# Each run starts from the same state: an earlier run's worktrees and branches would make the
# next one fail fast ("already used by worktree") and measure nothing.
reset_repos() {
  for n in $(seq -w 1 "$count"); do
    git -C "$work/r$n" worktree list --porcelain | awk '/^worktree /{print $2}' | tail -n +2 |
      while read -r wt; do git -C "$work/r$n" worktree remove --force "$wt"; done
    git -C "$work/r$n" worktree prune
    git -C "$work/r$n" branch --list 'fix/*' --format='%(refname:short)' |
      while read -r b; do git -C "$work/r$n" branch -q -D "$b"; done
  done
}
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
    reset_repos
    start=$(now)
    (cd "$work" && "$bin" batch task.yaml --repos repos.yaml --out "$out" --jobs 1 > /dev/null 2>&1) || true
    end=$(now)
    echo "round $round: $bin: $(echo "($end - $start) * 1000 / $count" | bc -l | xargs printf '%.1f') ms per repository"
  done
done
# tollgate's own CPU time (its threads, not the processes it started), read from its zombie's
# /proc/PID/stat before it is reaped: the figure the batch's per-repository target is about.
own_cpu() {
  python3 - "$@" <<'PY'
import os, sys, time
wd, *cmd = sys.argv[1:]
pid = os.fork()
if pid == 0:
    os.chdir(wd)
    null = os.open("/dev/null", os.O_WRONLY); os.dup2(null, 1); os.dup2(null, 2)
    os.execv(cmd[0], cmd)
while True:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        break
    time.sleep(0.001)
tick = os.sysconf("SC_CLK_TCK")
print((int(fields[11]) + int(fields[12])) * 1000 // tick, (int(fields[13]) + int(fields[14])) * 1000 // tick)
os.waitpid(pid, 0)
PY
}
if command -v python3 > /dev/null; then
  for bin in "$@"; do
    out="$work/out-cpu-$(basename "$bin")"
    reset_repos
    read -r own children < <(own_cpu "$work" "$bin" batch task.yaml --repos repos.yaml --out "$out" --jobs 1)
    echo "$bin: own CPU $own ms ($(echo "$own / $count" | bc -l | xargs printf '%.1f') ms per repository, start-up included), its processes $children ms"
  done
fi
if command -v strace > /dev/null; then
  for bin in "$@"; do
    out="$work/out-strace-$(basename "$bin")"
    reset_repos
    calls=$(cd "$work" && strace -f -c -e trace=fsync,fdatasync,syncfs "$bin" batch task.yaml --repos repos.yaml --out "$out" --jobs 1 2>&1 >/dev/null | awk '/fsync|fdatasync|syncfs/ {sum += $4} END {print sum + 0}' || true)
    echo "$bin: $calls fsync/fdatasync calls, $(echo "$calls / $count" | bc -l | xargs printf '%.1f') per repository (git's own included)"
  done
fi
