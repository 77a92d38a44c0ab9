package config

// The config reference is generated from this package's types, doc comments
// and default tags; TestReferenceUpToDate fails when it is stale.
//go:generate go run ./internal/gendoc -dir . -out ../docs/config.md
