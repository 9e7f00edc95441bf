#!/usr/bin/env bash
# Builds tollgate's container image (Containerfile) with podman from local files only — no
# network at build time — and smoke-tests it: `tollgate --version` and the quick start run
# inside it with networking off. Usage: scripts/build-image.sh [TAG] (default
# localhost/tollgate:dev). The rootfs is the static binary (scripts/build-static.sh, or
# TOLLGATE_BIN), bash, busybox (Debian's busybox-static) and git with https, with the shared
# libraries `ldd` lists for them, copied from this (Debian/Ubuntu) host.
#
# Storage: podman's vfs driver in TOLLGATE_IMAGE_STORE (default: a temporary folder, removed
# on exit), so the script needs no overlay support and leaves the host's podman alone. Set
# TOLLGATE_IMAGE_STORE to keep the image, then e.g. `podman --root "$STORE/root" save`.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tag="${1:-localhost/tollgate:dev}"
fail() {
  echo "build-image: error: $*" >&2
  exit 1
}
step() { echo "build-image: $*" >&2; }

command -v podman >/dev/null || fail "podman is needed (apt-get install podman runc)"
busybox="$(command -v busybox || true)"
if [ -z "$busybox" ] || ! file -b "$busybox" | grep -q 'statically linked'; then
  fail "a static busybox is needed (apt-get install busybox-static)"
fi
bin="${TOLLGATE_BIN:-$("$root/scripts/build-static.sh")}"
[ -x "$bin" ] || fail "no tollgate binary at $bin"

work="$(mktemp -d)"
store="${TOLLGATE_IMAGE_STORE:-$work/store}"
cleanup() {
  # vfs layers belong to root-owned, read-only trees in places; podman removes them best.
  [ -n "${TOLLGATE_IMAGE_STORE:-}" ] || podman --root "$store/root" --runroot "$store/run" \
    --storage-driver vfs system reset --force >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

rootfs="$work/context/rootfs"
mkdir -p "$rootfs"/{bin,usr/bin,usr/local/bin,usr/lib/git-core,etc/ssl/certs,root,home/tollgate,work,tmp}
chmod 1777 "$rootfs/tmp"

# copy_with_libs FILE DEST: FILE at DEST in the rootfs, and every library ldd lists for it
# at the same path as on the host (so the dynamic loader finds them unchanged).
copy_with_libs() {
  local file="$1" dest="$2" lib
  cp -L "$file" "$rootfs$dest"
  for lib in $(ldd "$file" | grep -oE '/[^ ]+' || true); do
    [ -e "$rootfs$lib" ] && continue
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done
}
cp "$bin" "$rootfs/usr/local/bin/tollgate"
cp "$busybox" "$rootfs/bin/busybox"
for applet in $("$busybox" --list); do
  case "$applet" in busybox | bash | git) continue ;; esac
  [ -e "$rootfs/bin/$applet" ] || ln -s busybox "$rootfs/bin/$applet"
done
copy_with_libs /bin/bash /bin/bash
copy_with_libs /usr/bin/git /usr/bin/git
copy_with_libs /usr/lib/git-core/git-remote-http /usr/lib/git-core/git-remote-http
for scheme in https ftp ftps; do ln -s git-remote-http "$rootfs/usr/lib/git-core/git-remote-$scheme"; done
cp -L /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
cat >"$rootfs/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/bash
tollgate:x:1000:1000:tollgate:/home/tollgate:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
printf 'root:x:0:\ntollgate:x:1000:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
printf 'hosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
chown -R 1000:1000 "$rootfs/home/tollgate"
cp "$root/Containerfile" "$work/context/Containerfile"

podman=(podman --root "$store/root" --runroot "$store/run" --storage-driver vfs)
# Where crun cannot run (cgroups v1/hybrid hosts, as in some CI sandboxes) runc can. The
# ulimits are explicit because podman's defaults may exceed what a host without
# CAP_SYS_RESOURCE can grant; they stay above what tollgate's sandbox sets for each command
# (RLIMIT_NOFILE 8192, RLIMIT_NPROC 512, plus grace), which it cannot raise past a hard limit.
run_flags=(--rm --network none --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)"
  --ulimit nproc=4096:4096)
if [ ! -e /sys/fs/cgroup/cgroup.controllers ] && command -v runc >/dev/null; then
  podman+=(--runtime runc)
fi

step "building $tag from $rootfs ($(du -sh "$rootfs" | cut -f1))"
"${podman[@]}" build --quiet --network none --pull=never --tag "$tag" "$work/context" >/dev/null \
  || fail "podman build failed"
size="$("${podman[@]}" image inspect --format '{{.Size}}' "$tag")"
step "built $tag: $size bytes"

version="$("${podman[@]}" run "${run_flags[@]}" "$tag" --version)" \
  || fail "tollgate --version failed in the image"
step "in the image: $version"

# The quick start, as the README runs it, on a scratch copy mounted at /work.
mkdir -p "$work/quickstart"
cp -r "$root/examples" "$root/policies" "$work/quickstart/"
code=0
"${podman[@]}" run "${run_flags[@]}" -v "$work/quickstart:/work" "$tag" \
  run examples/quickstart.yaml >"$work/quickstart.out" 2>&1 || code=$?
cat "$work/quickstart.out" >&2
[ "$code" = 0 ] || fail "the quick start exited $code in the image, expected 0"
# As on the host: the one denial is `rm -rf build`, the one tool error the first Read of
# review.md; a second error would be a Bash command the image could not start.
grep -q '1 denied · 1 tool error$' "$work/quickstart.out" \
  || fail "the quick start's tool calls did not run in the image as on the host"
grep -q 'check review-recorded: passed' "$work/quickstart.out" \
  || fail "the quick start's checks did not pass in the image"
step "the quick start passed in the image (git: $("${podman[@]}" run "${run_flags[@]}" \
  --entrypoint git "$tag" --version))"
