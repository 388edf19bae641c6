package convert

// SetWholeSlabs makes every slab go through the worker whole (true) instead of in bands, and
// returns a function restoring the setting: the whole-slab path is the specification the band
// path is tested against.
func SetWholeSlabs(on bool) (restore func()) {
	old := wholeSlabs
	wholeSlabs = on
	return func() { wholeSlabs = old }
}

// BandSlabs returns the number of slabs that went through the worker in bands so far.
func BandSlabs() int64 { return bandSlabs.Load() }
