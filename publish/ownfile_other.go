//go:build !unix

package publish

import "io/fs"

// nonBlock is 0 where opening a FIFO does not block.
const nonBlock = 0

// linkCount is 1 where the link count is not known.
func linkCount(fs.FileInfo) uint64 { return 1 }

// identityOf knows no status-change time here: recorded sums are never trusted.
func identityOf(fs.FileInfo) (fileID, bool) { return fileID{}, false }
