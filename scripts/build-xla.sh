#!/usr/bin/env bash
# Builds hacrl with the XLA backend (cgo, -tags xla) into bin/hacrl-xla, the
# binary scripts/device-check.sh runs on a GPU machine that has no Go: built
# here and carried there. Stripped (-s -w) to travel light (about 45 MB);
# prints the newest glibc symbol version it needs (2.34: Debian 12, Ubuntu
# 22.04 and later).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bin/hacrl-xla}"
CGO_ENABLED=1 GOEXPERIMENT=simd go build -tags xla -trimpath -ldflags "-s -w" -o "$out" ./cmd/hacrl
glibc="$(objdump -T "$out" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1 || true)"
echo "$out: $(du -m "$out" | cut -f1) MB, needs ${glibc:-an unknown glibc}" >&2
