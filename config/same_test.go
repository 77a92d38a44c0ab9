package config

import "reflect"

// sameValues reports whether two configs hold the same values, wherever
// they came from: the lines and overrides a parsed config keeps for its
// messages are left out of the comparison.
func sameValues(a, b *Config) bool { return a.Equal(b) }

// sameSFTValues is sameValues for SFT configs.
func sameSFTValues(a, b *SFT) bool {
	x, y := *a, *b
	x.src, y.src = nil, nil
	return reflect.DeepEqual(x, y)
}
