#!/usr/bin/env bash
# Simulates action.yml's start-up from a release, here: serves a GitHub-like file tree
# (<owner>/<name>/releases/download/v<version>/, holding the static binary as
# tollgate-<target> and SHA256SUMS, for the owner/name of Cargo.toml's `repository`) from a
# file server on 127.0.0.1, installs from it with scripts/install-release.sh — the script the
# action runs, with GITHUB_SERVER_URL pointed at the server and TOLLGATE_REPOSITORY set as
# the action sets it from github.action_repository — and runs the quick start with the
# installed binary, timing each part. Then checks the two ways it must refuse: a version
# with no release (exit 10: the action builds from source) and a binary that does not match
# its checksum (an error: nothing is installed). Usage: scripts/simulate-action.sh
# (TOLLGATE_BIN: a binary to serve instead of building one with scripts/build-static.sh).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fail() {
  echo "simulate-action: error: $*" >&2
  exit 1
}
step() { echo "simulate-action: $*"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

bin="${TOLLGATE_BIN:-$("$root/scripts/build-static.sh")}"
target="$(uname -m)-unknown-linux-gnu"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)"
repository="$(sed -n 's|^repository = "https://github.com/\([^/"]*/[^/"]*\)"$|\1|p' "$root/Cargo.toml")"
[ -n "$repository" ] || fail "Cargo.toml's repository is not https://github.com/<owner>/<name>"

work="$(mktemp -d)"
server=""
cleanup() {
  [ -z "$server" ] || kill "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The release as the workflow publishes it: tollgate-<target> and SHA256SUMS under the
# release's download path on github.com.
releases="$work/www/$repository/releases/download"
release="$releases/v$version"
mkdir -p "$release"
cp "$bin" "$release/tollgate-$target"
(cd "$release" && sha256sum "tollgate-$target" >SHA256SUMS)
# A tampered release: the same checksum file, different bytes.
mkdir -p "$releases/v0.0.0"
cp "$release/SHA256SUMS" "$releases/v0.0.0/"
printf 'not tollgate' >"$releases/v0.0.0/tollgate-$target"

# The file server binds port 0 and writes the port it got, so parallel runs never collide.
python3 - "$work/www" "$work/port" >"$work/server.log" 2>&1 <<'PY' &
import functools, http.server, sys
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
with open(sys.argv[2] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
server.serve_forever()
PY
server=$!
for _ in $(seq 100); do
  [ -s "$work/port" ] && break
  kill -0 "$server" 2>/dev/null || fail "the file server did not start: $(cat "$work/server.log")"
  sleep 0.1
done
[ -s "$work/port" ] || fail "the file server did not report its port"
# What the action passes to install-release.sh, with the server in github.com's place.
GITHUB_SERVER_URL="http://127.0.0.1:$(cat "$work/port")"
export GITHUB_SERVER_URL TOLLGATE_REPOSITORY="$repository"

start="$(now_ms)"
bash "$root/scripts/install-release.sh" "$version" "$work/bin" \
  || fail "install-release.sh could not install v$version from $GITHUB_SERVER_URL"
installed="$(now_ms)"
cmp -s "$bin" "$work/bin/tollgate" || fail "the installed binary differs from the served one"

cp -r "$root/examples" "$root/policies" "$work/"
code=0
"$work/bin/tollgate" run "$work/examples/quickstart.yaml" --out "$work/out" \
  >"$work/quickstart.out" 2>&1 || code=$?
finished="$(now_ms)"
[ "$code" = 0 ] || { cat "$work/quickstart.out" >&2; fail "the quick start exited $code"; }

code=0
bash "$root/scripts/install-release.sh" 9.9.9 "$work/none" 2>/dev/null || code=$?
[ "$code" = 10 ] || fail "a version without a release exited $code, expected 10"
# At a local action (`uses: ./`) github.action_repository is empty: no repository is guessed.
code=0
TOLLGATE_REPOSITORY="" bash "$root/scripts/install-release.sh" "$version" "$work/none" \
  2>/dev/null || code=$?
[ "$code" = 10 ] || fail "no release repository exited $code, expected 10"
[ ! -e "$work/none/tollgate" ] || fail "a binary was installed without a release repository"
code=0
bash "$root/scripts/install-release.sh" 0.0.0 "$work/tampered" \
  2>"$work/tampered.err" || code=$?
{ [ "$code" != 0 ] && [ "$code" != 10 ]; } || fail "a tampered binary exited $code, expected an error"
grep -q 'does not match' "$work/tampered.err" || fail "the tampered binary was not refused by its checksum"
[ ! -e "$work/tampered/tollgate" ] || fail "the tampered binary was installed"

# A version that climbs out of its release folder is refused before any download.
code=0
bash "$root/scripts/install-release.sh" "$version/../../../../../evil/tool/releases/download/v6.6.6" \
  "$work/traversal" 2>"$work/traversal.err" || code=$?
[ "$code" = 1 ] || fail "a traversal version exited $code, expected 1"
grep -q 'version must be' "$work/traversal.err" || fail "the traversal version was not refused"
[ ! -e "$work/traversal/tollgate" ] || fail "a binary was installed for a traversal version"

step "download + SHA-256 check: $((installed - start)) ms ($(stat -c %s "$bin") bytes)"
step "quick start with the installed binary: $((finished - installed)) ms"
step "start-up from a release, total: $((finished - start)) ms"
step "no release or no repository -> exit 10 (source build); tampered binary, traversal version -> refused, not installed"
