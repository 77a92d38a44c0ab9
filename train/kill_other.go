//go:build !unix

package train

import "os"

func killSelf() { os.Exit(137) }
