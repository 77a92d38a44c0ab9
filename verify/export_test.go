package verify

// WithThousands is withThousands (gold_test.go) for the external tests:
// digits with a comma between each group of three.
var WithThousands = withThousands

// FracLaTeX is fracLaTeX (gold_test.go) for the external tests.
var FracLaTeX = fracLaTeX
