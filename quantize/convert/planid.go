package convert

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// ID identifies the plan: the source shards (headers, size and modification time) and the
// options. A resumed run must have the same ID: shards finished from a source that changed
// since are not kept.
func (p *Plan) ID() string {
	h := sha256.New()
	for _, s := range p.Source.Shards {
		fmt.Fprintf(h, "%s %d %d %d\n", s.Name, s.Size, s.Header.DataStart, s.ModTime.UnixNano())
	}
	b, _ := json.Marshal(p.Options)
	h.Write(b)
	if p.ConfigSHA256 != "" {
		fmt.Fprintf(h, "config %s\n", p.ConfigSHA256)
	}
	if c := p.Options.Calib; c != nil {
		fmt.Fprintf(h, "calib %s\n", c.ID)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// InputBytes is the total size of the source's shard files.
func (p *Plan) InputBytes() int64 {
	var n int64
	for _, s := range p.Source.Shards {
		n += s.Size
	}
	return n
}
