package convert

// Events are optional callbacks through which a run tells its caller what it decides and
// finishes, for messages and logs. They are called from any goroutine and must return quickly.
type Events struct {
	// Resumed is called once, before any work, with what the output directory already holds.
	Resumed func(ResumeInfo)
	// ShardDone is called after an output shard is complete under its final name and recorded
	// in the journal.
	ShardDone func(ShardEvent)
}

// ResumeInfo counts the output shards that an earlier run of the same plan finished and that a
// resumed run keeps: recorded in the journal, and still of the recorded size and SHA-256.
type ResumeInfo struct {
	PrefillDone, PrefillShards int
	DecodeDone, DecodeShards   int
	// KeptTensors counts the finished tensors of unfinished shards kept (their checksums matched).
	KeptTensors int
}

// Any reports whether some finished work is kept.
func (ri ResumeInfo) Any() bool { return ri.PrefillDone+ri.DecodeDone+ri.KeptTensors > 0 }

// Complete reports whether every shard of every output is finished.
func (ri ResumeInfo) Complete() bool {
	return ri.PrefillDone == ri.PrefillShards && ri.DecodeDone == ri.DecodeShards
}

// ShardEvent is one finished output shard.
type ShardEvent struct {
	Output string // "prefill" or "decode"
	File   string // the shard's file name inside the output directory
	Bytes  int64
	Cloned bool // a prefill shard that shares its blocks with the source's (nothing written)
}

// resumed reports the shards of plan p that journal j (already verified) holds, counting only
// the files in own when it is not nil (a part's).
func (e Events) resumed(p *Plan, j *journal, own map[string]bool) {
	if e.Resumed == nil {
		return
	}
	var ri ResumeInfo
	count := func(out *Output, done, total *int) {
		if out == nil {
			return
		}
		names := make([]string, 0, len(out.Shards))
		if out.CopySource {
			for _, s := range p.Source.Shards {
				names = append(names, s.Name)
			}
		} else {
			for _, s := range out.Shards {
				names = append(names, s.FileName)
			}
		}
		for _, n := range names {
			key := string(out.Kind) + "/" + n
			if own != nil && !own[key] {
				continue
			}
			*total++
			if _, ok := j.Shards[key]; ok {
				*done++
			}
		}
	}
	count(p.Output(KindPrefill), &ri.PrefillDone, &ri.PrefillShards)
	count(p.Output(KindDecode), &ri.DecodeDone, &ri.DecodeShards)
	ri.KeptTensors = len(j.Tensors) // newShardSet has dropped those that failed their check
	e.Resumed(ri)
}

func (e Events) shardDone(output OutputKind, file string, bytes int64, cloned bool) {
	if e.ShardDone != nil {
		e.ShardDone(ShardEvent{Output: string(output), File: file, Bytes: bytes, Cloned: cloned})
	}
}
