// Package devicecheck holds the suite's dry run of scripts/device-check.sh,
// the prepared check of hacrl's XLA path that a session runs on a lent GPU
// machine (xla:cuda against PyTorch and transformers on the same GPU: per-
// token log-probs, engine throughput and memory, one HACPO step).
//
// A GPU run is rare and short, so nothing in it may be found broken there:
// the test builds the -tags xla binary the way scripts/build-xla.sh does,
// runs the whole script with --cpu (every part, shortened, on xla:cpu with
// PyTorch on the CPU) and checks that the report has every part, that its
// figures are positive and finite, and that hacrl's log-probs agree with
// transformers'. The package has no code of its own; the test is built only
// with -tags xla.
package devicecheck
