package model

import "slices"

// Every Exec compiles one graph per distinct tuple of input shapes, so
// sequence lengths and batch sizes are padded up to a few buckets:
//
//   - lengths: 8, then powers of two and their midpoints (16, 24, 32, 48, 64,
//     96, 128, 192, ...), so padding wastes at most a third;
//   - batch rows: powers of two (1, 2, 4, ...);
//   - a scoring or training pass holds at most tokenBudget tokens
//     (rows × length) and at most logitBudget logits; larger requests are split
//     into several passes of whole sequences.
//
// A model therefore compiles at most a few dozen shapes per purpose
// (scoring, training, prefill, decoding), well under maxCompiledShapes.

const (
	tokenBudget = 8192
	logitBudget = 1 << 25
)

// lengthBucket rounds n up to its length bucket.
func lengthBucket(n int) int {
	if n <= 8 {
		return 8
	}
	p := 8
	for p < n {
		if p+p/2 >= n {
			return p + p/2
		}
		p *= 2
	}
	return p
}

// batchBucket rounds n ≥ 1 up to a power of two.
func batchBucket(n int) int {
	b := 1
	for b < n {
		b *= 2
	}
	return b
}

// planChunks splits the rows with the given lengths into passes: rows are
// taken in order of increasing length, and a pass grows while its padded size
// (rows rounded to a power of two × the longest row's length bucket) stays
// within the token and logit budgets. Every pass has at least one row.
func planChunks(lengths []int, vocab int) [][]int {
	order := make([]int, len(lengths))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return lengths[a] - lengths[b] })
	budget := min(tokenBudget, max(1, logitBudget/vocab))
	var chunks [][]int
	var cur []int
	for _, i := range order {
		if len(cur) > 0 && batchBucket(len(cur)+1)*lengthBucket(lengths[i]) > budget {
			chunks = append(chunks, cur)
			cur = nil
		}
		cur = append(cur, i)
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	return chunks
}
