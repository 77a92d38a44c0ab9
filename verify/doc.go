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
// A decimal literal stands for the numbers it can be a rounding of: besides
// the relative tolerance, a decimal and another number literal must be
// within half a unit of the decimal's last written place of each other, so
// 4.66667 matches \frac{14}{3} but 3159.1 matches neither 3159 nor 3159.0.
// A percentage matches its bare number and its value over 100, with either
// sign ("-5\%", "-5" and "-0.05").
//
// Every entry point is bounded: long inputs, deep nesting, huge exponents and
// factorials are rejected or evaluated approximately, and any internal panic is
// recovered and reported as "not equal". Reward is the binary reward used by
// the training loop; VerifyJSONL backs the "hacrl verify --jsonl" command.
//
// # Agreement with math-verify
//
// Hugging Face's math-verify (0.9.0, SymPy based) is the oracle of
// TestMathVerifyAgreement: every reference of the shared benchmarks (MATH,
// MATH-500, GSM8K, AIME 2024/2025, AMC 2023, Minerva, OlympiadBench) is judged
// against itself and against variants a model writes (boxed or not, units,
// \frac against /, decimals against fractions, percentages, intervals, sets,
// tuples, text, scientific notation, LaTeX spacing, \left/\right, mixed
// numbers, wrong numbers, other references), 24,425 pairs, and both must give
// the same verdict on every pair but the deliberate differences listed, with
// their reasons, in testdata/mathverify_differences.txt and
// docs/verify-agreement.md. In short, hacrl says equal where math-verify
// does not for: answers outside $...$ or \boxed{} that are more than a
// number (math-verify reads only a number there); e-notation (1.45e+06,
// whose e math-verify reads as Euler's number); a mantissa times a power of
// ten that is not exact in binary floating point (1.0455 \times 10^{4});
// decimals rounding a fraction to about 5 significant digits (math-verify
// wants 6 decimal places); negative and decimal percentages against their
// bare number; Leibniz derivatives written (dv)/(dt); and references
// math-verify misreads. hacrl says not equal where math-verify says equal
// for a closed bracket at an infinite end ([-\infty, 0] for (-\infty, 0])
// and for one value where the reference lists the same value twice.
package verify
