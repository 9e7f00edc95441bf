#!/usr/bin/env bash
# Builds tollgate's release binary: statically linked against glibc (`crt-static`), stripped,
# reproducible from this one command. Usage: scripts/build-static.sh [TARGET_TRIPLE]
# (default: the host's). Prints the binary's path last; checks with `file` and `ldd` that it
# needs no shared library, and that it runs.
#
# TOLLGATE_PROFILE picks the Cargo profile (default `dist`, the release's). .ci/run sets
# `ci-static`: the same target, flags, linkage, stripping and checks, without the
# optimisation that makes `dist` take minutes (see Cargo.toml).
#
# Why glibc and not musl: this toolchain has no musl target and cannot download one. A static
# glibc binary runs on any Linux kernel >= 3.2 without libc.so, but glibc's NSS cannot be
# linked in: host names resolve only through /etc/hosts and DNS (/etc/resolv.conf), never
# through nsswitch plug-ins (systemd-resolved's nss module, LDAP, mDNS). See docs/install.md.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${1:-$(rustc -vV | sed -n 's/^host: //p')}"
profile="${TOLLGATE_PROFILE:-dist}"
fail() {
  echo "build-static: error: $*" >&2
  exit 1
}
case "$profile" in
  dist | ci-static) ;;
  *) fail "TOLLGATE_PROFILE must be dist or ci-static, not $profile" ;;
esac

cd "$root"
# --target keeps RUSTFLAGS off build scripts and proc macros (which must stay dynamic).
# The remaps keep the machine's paths out of the binary (Rust's panic locations, and the C
# sources' __FILE__ in tree-sitter's asserts), so the checkout's folder and CARGO_HOME do not
# change its bytes; SOURCE_DATE_EPOCH pins what C build scripts may stamp.
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
export RUSTFLAGS="-C target-feature=+crt-static \
  --remap-path-prefix=$root=/tollgate --remap-path-prefix=$cargo_home=/cargo"
export CFLAGS="${CFLAGS:-} -ffile-prefix-map=$root=/tollgate -ffile-prefix-map=$cargo_home=/cargo"
export CARGO_INCREMENTAL=0
# -p: the dependencies' features are the main crate's own, not unified with those of the other
# default members (the test-support crate's HTTP server, through axum).
cargo build --locked --profile "$profile" --target "$target" -p tollgate --bin tollgate >&2 \
  || fail "cargo build failed"

bin="$root/target/$target/$profile/tollgate"
[ -x "$bin" ] || fail "no binary at $bin"
description="$(file -b "$bin")"
case "$description" in
  *"statically linked"* | *"static-pie linked"*) ;;
  *) fail "file says $bin is not static: $description" ;;
esac
case "$description" in
  *", stripped"*) ;;
  *) fail "file says $bin is not stripped: $description" ;;
esac
if strings "$bin" | grep -qF -e "$root/" -e "$cargo_home/"; then
  fail "$bin holds paths of this machine ($root, $cargo_home)"
fi
# ldd exits 1 for a static binary, printing "not a dynamic executable" (or, for static-pie,
# "statically linked"); anything listing a .so is a failure.
if ldd "$bin" 2>&1 | grep -q '\.so'; then
  ldd "$bin" >&2
  fail "ldd lists shared libraries for $bin"
fi
"$bin" --version >/dev/null || fail "$bin --version failed"
echo "build-static: $bin: $description; $(stat -c %s "$bin") bytes" >&2
echo "$bin"
