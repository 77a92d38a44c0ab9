// Package deps pins modules that packages under construction will import, so
// that `go mod tidy` keeps them in go.mod. Remove an import here once a real
// package imports the module.
package deps
