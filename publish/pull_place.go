package publish

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"

	"pdq/internal/units"
)

// ErrNoSpace: the directory's file system has less free space than the pull needs.
var ErrNoSpace = errors.New("publish: not enough free space")

// checkSpace refuses, before anything is downloaded, a pull whose files do not fit in the free
// space of dir's file system: the files not yet present, plus, for compressed ones, the stored
// objects being decompressed at the same time (at most parallel of them, the largest counted),
// less what an earlier run left in the state folder.
func (p *puller) checkSpace(files []File, present []bool, parallel int) error {
	free, ok := freeSpace(p.root.Name())
	if !ok {
		return nil
	}
	var need int64
	var packed []int64
	for i, f := range files {
		switch {
		case present[i]:
		case f.Compression == CompressionZipNN:
			need += f.Size
			packed = append(packed, f.StoredSize)
		default:
			need += f.StoredSize
		}
	}
	sort.Slice(packed, func(i, j int) bool { return packed[i] > packed[j] })
	for _, n := range packed[:min(parallel, len(packed))] {
		need += n
	}
	need -= p.stateBytes()
	if need <= free {
		return nil
	}
	return fmt.Errorf("%w: the pull needs %s more in %s, and its file system has %s free; free some space or pull into another directory (nothing was downloaded)",
		ErrNoSpace, sizeText(need), quote(p.root.Name()), sizeText(free))
}

// stateBytes returns the bytes on disk of an earlier run's working files.
func (p *puller) stateBytes() int64 {
	var n int64
	fs.WalkDir(p.root.FS(), pullState, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += allocated(fi)
			}
		}
		return nil
	})
	return n
}

// sizeText prints a byte count with a binary unit (units.Bytes).
func sizeText(n int64) string { return units.Bytes(n) }

// isNoSpace says whether err is a full file system (or quota).
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// staged is a verified file waiting in the state folder for its final name.
type staged struct {
	name string      // its name in the state folder
	info os.FileInfo // of the file that was hashed
}

// placeRank orders the final renames: the data first, then the report, then config.json, and
// the safetensors index last, so that a directory that looks like a checkpoint (a config and an
// index) holds every file of it.
func placeRank(p string) int {
	base := path.Base(p)
	switch {
	case strings.HasSuffix(base, ".index.json"):
		return 3
	case base == "config.json":
		return 2
	case p == ReportName:
		return 1
	}
	return 0
}

// placeAll gives every staged file its final name, in placeRank order, each checked to be the
// file that was hashed. If one cannot be placed, those placed already go back to the state
// folder, so that no final name holds a file of an unfinished pull.
func (p *puller) placeAll(files []File, st []staged) error {
	order := make([]int, 0, len(files))
	for i := range files {
		if st[i].name != "" {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		return placeRank(files[order[a]].Path) < placeRank(files[order[b]].Path)
	})
	var placed []int
	var made []string // directories made for final names, parents first
	undo := func() {
		for _, i := range placed {
			p.root.Rename(files[i].Path, st[i].name)
		}
		for k := len(made) - 1; k >= 0; k-- {
			p.root.Remove(made[k]) // empty again, unless something else came
		}
	}
	dirs := map[string]bool{}
	for _, i := range order {
		f := files[i]
		var missing []string
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			if _, err := p.root.Lstat(d); err == nil {
				break
			}
			missing = append(missing, d)
		}
		for k := len(missing) - 1; k >= 0; k-- {
			made = append(made, missing[k])
		}
		if err := p.root.MkdirAll(path.Dir(f.Path), 0o755); err != nil {
			undo()
			return fmt.Errorf("publish: %w", err)
		}
		if err := p.root.Rename(st[i].name, f.Path); err != nil {
			undo()
			return fmt.Errorf("publish: %w", err)
		}
		// What now has the final name must be the file whose bytes were hashed.
		if fi, err := p.root.Lstat(f.Path); err != nil || !os.SameFile(st[i].info, fi) {
			undo()
			p.root.Remove(f.Path)
			return fmt.Errorf("%w: %s changed while it was put in place", ErrCorrupt, quote(f.Path))
		}
		placed = append(placed, i)
		dirs[path.Dir(f.Path)] = true
	}
	for d := range dirs {
		if err := syncRootDir(p.root, d); err != nil {
			return err
		}
	}
	return nil
}

// somethingAt says whether name, or one of its parents, is a symbolic link or a file that is not
// a directory (without following links).
func (p *puller) somethingAt(name string) bool {
	if _, err := p.root.Lstat(name); err == nil {
		return true
	}
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		if li, err := p.root.Lstat(d); err == nil && !li.IsDir() {
			return true
		}
	}
	return false
}
