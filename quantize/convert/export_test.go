package convert

// SetWholeSlabs makes every slab one band (true) instead of cutting it into bands where the
// encoders take them, and returns a function restoring the setting: the bytes and the figures
// must not depend on the cut.
func SetWholeSlabs(on bool) (restore func()) {
	old := wholeSlabs
	wholeSlabs = on
	return func() { wholeSlabs = old }
}

// BandSlabs returns the number of slabs cut into bands so far.
func BandSlabs() int64 { return bandSlabs.Load() }
