package main

import (
	"strings"
	"testing"
)

// bench engine --weights-dtype bfloat16 samples with bfloat16 product
// weights and counts their bytes so: a Qwen3-shaped model's decoding step
// reads its projections and (tied) head at 2 bytes a weight and its norms
// at 4, against 4 for every weight in float32; with --lora-rank the frozen
// base is the bfloat16 one. A dtype other than float32 or bfloat16 is a
// usage error.
func TestBenchEngineWeightsDType(t *testing.T) {
	bin := hacrlBin(t)
	path := writeTinyQwen3Config(t)
	// Per layer: q|k|v 32×(64+2·32), o 64×32, gate|up 32×2·48, down 48×32;
	// norms 32+32 and q/k 16+16. The head is the 16×32 embedding; a final
	// norm of 32.
	const products, norms = 2*(32*128+64*32+32*96+48*32) + 16*32, 2*96 + 32
	base := []string{"bench", "engine", "--config", path, "--layers", "2", "--seq", "8", "--batch", "2", "--steps", "1",
		"--warmup", "1", "--sample-runs", "1", "--sample-batch", "2", "--sample-tokens", "4", "--threads", "1", "--mem-read-mb", "0"}
	for _, tt := range []struct {
		flags []string
		dtype string
		bytes float64 // 0: not checked
	}{
		{nil, "float32", 4 * (products + norms)},
		{[]string{"--weights-dtype", "bfloat16"}, "bfloat16", 2*products + 4*norms},
		{[]string{"--weights-dtype", "bfloat16", "--lora-rank", "2"}, "bfloat16", 0},
	} {
		r := run(t, bin, "", "", nil, append(base, tt.flags...)...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d\n%s", tt.flags, r.code, r.stderr)
		}
		vals := jsonValues(t, r.stdout)
		if len(vals) != 1 {
			t.Fatalf("%v: %d JSON values, want 1", tt.flags, len(vals))
		}
		res := vals[0]
		if res["weights_dtype"] != tt.dtype {
			t.Errorf("%v: weights_dtype %v, want %s", tt.flags, res["weights_dtype"], tt.dtype)
		}
		if tt.bytes != 0 && res["decode_weight_bytes"] != tt.bytes {
			t.Errorf("%v: decode_weight_bytes %v, want %v", tt.flags, res["decode_weight_bytes"], tt.bytes)
		}
		if gbs, ok := res["decode_weight_gb_per_s"].(float64); !ok || gbs <= 0 {
			t.Errorf("%v: decode_weight_gb_per_s %v", tt.flags, res["decode_weight_gb_per_s"])
		}
	}
	r := run(t, bin, "", "", nil, append(base, "--weights-dtype", "float16")...)
	if r.code != 2 || !strings.Contains(r.stderr, "--weights-dtype") {
		t.Errorf("--weights-dtype float16: exit %d, want 2 naming the flag\n%s", r.code, r.stderr)
	}
}
