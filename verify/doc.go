// Package verify checks math answers: it extracts the final answer from a
// model's response, normalizes LaTeX and plain-text notation, and decides
// whether two answers are mathematically equal.
//
// Equality is decided on a parsed expression tree, not on strings: numbers are
// compared as exact rationals where possible (with the Qwen2.5-Math relative
// tolerance of 1e-4 when a decimal literal is involved), and expressions with
// variables, radicals or constants are compared by evaluation at fixed
// pseudo-random points. Tuples, intervals, sets, lists of solutions, ±,
// equations, matrices, percentages and multiple-choice letters are understood.
//
// Every entry point is bounded: long inputs, deep nesting, huge exponents and
// factorials are rejected or evaluated approximately, and any internal panic is
// recovered and reported as "not equal". Reward is the binary reward used by
// the training loop; VerifyJSONL backs the "hacrl verify --jsonl" command.
package verify
