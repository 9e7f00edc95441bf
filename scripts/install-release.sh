#!/usr/bin/env bash
# Installs a released tollgate binary: picks the asset for this machine's OS and
# architecture, downloads it and the release's SHA256SUMS, verifies the checksum and puts
# the binary at DEST_DIR/tollgate. Used by action.yml, and by scripts/simulate-action.sh
# against a local file server. Usage: install-release.sh VERSION DEST_DIR
#
# VERSION is `latest` or MAJOR.MINOR.PATCH (a leading `v` is allowed), digits only: it
# becomes part of a URL, so anything else (`0.1.0/../../other/repo/…`) is refused before any
# download — a checksum file fetched from another repository would "verify" its binary.
#
# Exit codes: 0 installed; 10 no release matches (no asset for this runner, or the version
# has no release) — the caller may build from source; anything else is an error, and a
# checksum mismatch is one: a binary that does not match its release is never run, nor
# replaced by a source build that would hide the mismatch.
#
# The release is tag vVERSION of TOLLGATE_REPOSITORY (owner/name; the action sets it from
# github.action_repository) on GITHUB_SERVER_URL (default https://github.com). Without
# TOLLGATE_REPOSITORY no release is known: exit 10 — the repository is never guessed, so a
# binary is only ever downloaded from the releases of the action's own repository.
set -euo pipefail

no_release=10
fail() {
  echo "install-release: error: $*" >&2
  exit 1
}
[ $# = 2 ] || fail "usage: install-release.sh VERSION DEST_DIR"
version="${1#v}"
dest="$2"
# Whole-string matches with bash's own regex engine: no locale ranges, no newline slack.
number='(0|[1-9][0-9]{0,8})'
if [ "$version" != latest ] && ! [[ "$version" =~ ^$number\.$number\.$number$ ]]; then
  fail "version must be \`latest\` or MAJOR.MINOR.PATCH (e.g. 0.1.0), not $(printf '%q' "$1")"
fi
server="${GITHUB_SERVER_URL:-https://github.com}"
[[ "$server" =~ ^https?://[A-Za-z0-9]([A-Za-z0-9.-]{0,252})(:[0-9]{1,5})?$ ]] \
  || fail "GITHUB_SERVER_URL must be a scheme and a host (and port), not $(printf '%q' "$server")"

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) target=x86_64-unknown-linux-gnu ;;
  Linux-aarch64 | Linux-arm64) target=aarch64-unknown-linux-gnu ;;
  *)
    echo "install-release: no release binary for $(uname -s) $(uname -m)" >&2
    exit "$no_release"
    ;;
esac
if [ -z "${TOLLGATE_REPOSITORY:-}" ]; then
  echo "install-release: TOLLGATE_REPOSITORY is not set: no release to install" >&2
  exit "$no_release"
fi
# owner/name as GitHub spells them; `.` and `..` are no repository name.
repo="$TOLLGATE_REPOSITORY"
if ! [[ "$repo" =~ ^[A-Za-z0-9]([A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$ ]] \
  || [ "${repo#*/}" = . ] || [ "${repo#*/}" = .. ]; then
  fail "TOLLGATE_REPOSITORY must be owner/name, not $(printf '%q' "$repo")"
fi
if [ "$version" = latest ]; then
  base="$server/$repo/releases/latest/download"
else
  base="$server/$repo/releases/download/v$version"
fi
asset="tollgate-$target"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# fetch URL FILE: 0 fetched, 1 not found (HTTP 404), 2 any other failure.
fetch() {
  local status
  status="$(curl --silent --show-error --location --retry 3 --proto '=https,http' \
    --output "$2" --write-out '%{http_code}' "$1")" || return 2
  case "$status" in
    200) return 0 ;;
    404) return 1 ;;
    *) echo "install-release: $1 answered HTTP $status" >&2 && return 2 ;;
  esac
}
code=0
fetch "$base/SHA256SUMS" "$work/SHA256SUMS" || code=$?
if [ "$code" = 1 ]; then
  echo "install-release: no release v$version at $base" >&2
  exit "$no_release"
fi
[ "$code" = 0 ] || fail "could not download $base/SHA256SUMS"
expected="$(awk -v asset="$asset" '$2 == asset || $2 == "*" asset { print $1 }' "$work/SHA256SUMS")"
if [ -z "$expected" ]; then
  echo "install-release: release v$version has no $asset" >&2
  exit "$no_release"
fi
fetch "$base/$asset" "$work/$asset" || fail "could not download $base/$asset"
actual="$(sha256sum "$work/$asset" | cut -d' ' -f1)"
[ "$actual" = "$expected" ] \
  || fail "$asset does not match the release's SHA256SUMS (expected $expected, got $actual)"
mkdir -p "$dest"
install -m 0755 "$work/$asset" "$dest/tollgate"
echo "install-release: tollgate $version ($target, sha256 $actual) in $dest" >&2
