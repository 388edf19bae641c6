// Package units prints byte counts the one way every pdq command and message writes them:
// binary units with two decimals ("1.50 GiB"), so sizes read the same in convert's summary, a
// plan, a full-disk error and a pull.
package units

import "fmt"

// Bytes writes n with a binary unit: "512 B", "1.50 KiB", ..., "3.25 TiB".
func Bytes(n int64) string {
	switch {
	case n >= 1<<40:
		return fmt.Sprintf("%.2f TiB", float64(n)/(1<<40))
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
