#!/usr/bin/env bash
# The project's test command: vet, the whole test suite with the pure-Go
# backend and SIMD kernels, and the XLA backend's tests (-tags xla) on XLA's
# CPU plugin (scripts/xla-cpu-plugin.sh), the code path hacrl takes on GPUs.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOEXPERIMENT=simd
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
echo "== gofmt"
unformatted="$(gofmt -l .)"
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change: $unformatted" >&2
  exit 1
fi
echo "== go vet"
go vet ./...
echo "== CGO_ENABLED=0 build"
CGO_ENABLED=0 go build -o /dev/null ./...
echo "== GOARCH=arm64 go vet (the arm64 build, with the NEON kernels' assembly)"
GOARCH=arm64 CGO_ENABLED=0 go vet ./...
if command -v gcc >/dev/null; then
  echo "== XLA build (-tags xla) compiles"
  CGO_ENABLED=1 go vet -tags xla ./...
fi
echo "== Python environment (scripts/pyenv.sh: the pinned libraries the tests check hacrl against)"
# The tests' oracles: transformers, PEFT, tokenizers, math-verify, TensorBoard
# and PyTorch, pinned with hashes in scripts/pyenv/requirements.txt and cached
# between runs. HACRL_SKIP_PYPI=1 skips those tests on a machine without the
# Python package index; CI never sets it.
if [[ -z "${HACRL_PYTHON:-}" && "${HACRL_SKIP_PYPI:-}" != 1 ]]; then
  start=$SECONDS
  HACRL_PYTHON="$(./scripts/pyenv.sh)"
  export HACRL_PYTHON
  echo "$HACRL_PYTHON ready in $((SECONDS - start)) s"
fi
# The MLflow server tracking/mlflow's tests log to (package mlflowtest), in
# an environment of its own: scripts/pyenv/mlflow/requirements.txt.
if [[ -z "${HACRL_MLFLOW:-}" && "${HACRL_SKIP_PYPI:-}" != 1 ]]; then
  echo "== MLflow (scripts/mlflowenv.sh: the tracking server of the MLflow tests)"
  start=$SECONDS
  HACRL_MLFLOW="$(./scripts/mlflowenv.sh)"
  export HACRL_MLFLOW
  echo "$HACRL_MLFLOW ready in $((SECONDS - start)) s"
fi
if command -v gcc >/dev/null && [[ "${HACRL_SKIP_PYPI:-}" != 1 ]]; then
  echo "== XLA CPU plugin (scripts/xla-cpu-plugin.sh)"
  ./scripts/xla-cpu-plugin.sh
fi
# view's browser test (view/browser_test.go) drives Debian's Chromium,
# headless, through playwright-core; it must be installed before go test
# (unlike qemu below, which runs after it). Without it the test fails and
# names scripts/chromium.sh; HACRL_SKIP_NPM=1 skips it with the npm checks.
if [[ "${HACRL_SKIP_NPM:-}" != 1 ]]; then
  echo "== Chromium for view's browser test (scripts/chromium.sh)"
  ./scripts/chromium.sh >/dev/null || echo "== no Chromium: view's browser test will fail (see above)" >&2
fi
echo "== go test"
go test -count=1 -timeout 25m ./... 2>&1 | tee /tmp/hacrl-test.log
# The suite above ran on the best kernel path this CPU has (internal/kernel,
# HACRL_KERNELS); the kernel package's tests ran on every other path too.
# The engine's own tests run again on the portable Go loops, the path of
# CPUs without vector kernels: the engines agree, gradients, determinism.
echo "== go test ./model on the portable kernels (HACRL_KERNELS=portable)"
HACRL_KERNELS=portable go test -count=1 -timeout 10m ./model \
  -run 'Native|EnginesAgree|EnginesTrainAlike|SamplerMatchesScorer|Determinism|GradientFiniteDifferences|LoRAEnginesAgree|LoRAGradientsMatchGraph|MatchesPyTorch|GenerateSameWhateverMaxBatch|BatchJoinsAndLeaves|AccumulateMicroBatches' \
  2>&1 | tee -a /tmp/hacrl-test.log
# The arm64 build (internal/kernel's neon path, tile_arm64.s) under Debian's
# qemu-user: the kernel tests on neon (which leaves all but the products,
# Axpy, Add and Dot to the portable loops, so those run on arm64 too), and
# the engine's Generate, Score and Accumulate tests on neon. TestEveryPath,
# which would add the portable products (74 s under qemu), is skipped: they
# are the same Go loops the amd64 run above checks. qemu checks correctness
# only: its timings say nothing of an arm64 CPU's speed.
echo "== arm64 under qemu-user (scripts/qemu-arm64.sh)"
if qemu="$(./scripts/qemu-arm64.sh)"; then
  # -short: the products' largest shapes only with up to 17 (37) rows: the
  # many-row ones, about 30 s under qemu, run on amd64 above.
  GOARCH=arm64 CGO_ENABLED=0 go test -count=1 -short -timeout 10m -exec "$qemu" -skip '^TestEveryPath$' ./internal/kernel 2>&1 | tee -a /tmp/hacrl-test.log
  GOARCH=arm64 CGO_ENABLED=0 go test -count=1 -timeout 10m -exec "$qemu" ./model \
    -run '^(TestMatchesReference|TestSamplerMatchesScorer|TestGenerateSameWhateverMaxBatch|TestAccumulateMicroBatches|TestNativeStepIndependentOfSplitAndCores|TestNativeGradientsMatchGraph|TestDeterminism|TestGradientFiniteDifferences)$' \
    2>&1 | tee -a /tmp/hacrl-test.log
else
  echo "== no qemu-user: the arm64 build's tests did not run" >&2
fi
if command -v gcc >/dev/null; then
  # The tests of the XLA backend are in files built with -tags xla, and their
  # names contain XLA; the rest of those packages ran above.
  echo "== go test -tags xla -run XLA (the graph engine on XLA's CPU plugin)"
  mapfile -t xla_pkgs < <(grep -rl --include='*_test.go' '^//go:build xla' . | xargs -n1 dirname | sort -u)
  CGO_ENABLED=1 go test -count=1 -timeout 15m -tags xla -run XLA "${xla_pkgs[@]}" 2>&1 | tee -a /tmp/hacrl-test.log
else
  echo "== no C compiler: the XLA backend's tests (-tags xla, cgo) did not run" >&2
fi
