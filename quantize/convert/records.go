package convert

import (
	"pdq/quantize"
	"pdq/quantize/report"
)

// moduleRecords merges a finished module's slab metrics (in slab order) into report records.
func (r *runner) moduleRecords(mi int) {
	m := r.plan.Modules[mi]
	res := r.results[mi]
	for k, emit := range r.emits[mi] {
		kind := outputKinds[k]
		b := r.plan.bound(m, kind)
		tensor := b.ValueTensor()
		if !emit || tensor == "" {
			continue
		}
		outs := make([]outResult, len(res))
		var total quantize.Metrics
		for i := range res {
			outs[i] = res[i].outs[k]
			total.Merge(outs[i].met)
		}
		row := newTensorReport(kind, m, tensor, b.Scheme(), total)
		rec := record{Row: row, M: total}
		if an, ok := b.(annotator); ok {
			an.annotate(&rec, outs)
		}
		r.jmu.Lock()
		r.records[recordKey{kind, tensor}] = []record{rec}
		r.jmu.Unlock()
	}
	r.results[mi] = nil
}

// annotator is implemented by the bound encodings whose report rows say more than the error of
// the written bytes (INT4: the reference rule's figure, the group size, the method, calibration).
type annotator interface {
	annotate(rec *record, outs []outResult)
}

// journalTensor records a tensor finished in a shard still open, with its CRC-32C and its
// report record, so that a rerun after an interruption keeps it.
func (r *runner) journalTensor(set *shardSet, name string, crc *uint32) error {
	i := set.out.Where[name]
	fs := &finishedShard{CRC32C: crc}
	r.jmu.Lock()
	defer r.jmu.Unlock()
	fs.Records = r.records[recordKey{set.out.Kind, name}]
	return r.journal.addTensor(r.dir, set.key(i), name, fs)
}

// closeReady closes and journals the shards whose every tensor an earlier run finished.
func (r *runner) closeReady() error {
	for _, set := range r.sets() {
		for _, i := range set.ready() {
			crc, err := set.close(i)
			if err != nil {
				return err
			}
			if err := r.journalShard(set, i, crc); err != nil {
				return err
			}
		}
	}
	return nil
}

// journalShard records finished shard i, whose file has CRC-32C crc (its writer's, taken as the
// bytes were written), with the report rows of its tensors.
func (r *runner) journalShard(set *shardSet, i int, crc uint32) error {
	key := set.key(i)
	size := set.out.Shards[i].Layout.FileSize
	fs := &finishedShard{Size: size, CRC32C: &crc}
	r.jmu.Lock()
	defer r.jmu.Unlock()
	for _, spec := range set.out.Shards[i].Specs {
		fs.Records = append(fs.Records, r.records[recordKey{set.out.Kind, spec.Name}]...)
	}
	if err := r.journal.add(r.dir, key, fs); err != nil {
		return err
	}
	r.ro.Events.shardDone(set.out.Kind, set.out.Shards[i].FileName, size, false)
	return nil
}

// report assembles report.json from the records, in plan order.
func (r *runner) report() *report.Report {
	p := r.plan
	rep := &report.Report{
		Tool: r.ro.Tool, Source: p.Source.Dir, SourceLayout: p.Layout, Device: r.ro.Device,
		InputBytes: p.InputBytes(), Skipped: p.Skipped, Warnings: p.Warnings,
		Options: report.Options{DecodeFormat: string(p.Options.DecodeFormat), GroupSize: p.Options.GroupSize, Method: string(p.Options.Method), SignedScales: p.Options.SignedScales,
			Targets: p.Options.Targets, Ignore: p.Options.Ignore, DecodeDense: string(p.Options.DecodeDense), Only: string(p.Options.Only),
			MaxShardSize: p.Options.MaxShardSize},
	}
	if o := p.Output(KindPrefill); o != nil {
		rep.PrefillBytes = o.Bytes(p.Source)
	}
	if o := p.Output(KindDecode); o != nil {
		rep.DecodeBytes = o.Bytes(p.Source)
	}
	sums := map[[3]string]*roleAcc{}
	for _, kind := range outputKinds {
		for _, m := range p.Modules {
			tensor := p.bound(m, kind).ValueTensor()
			recs := r.records[recordKey{kind, tensor}]
			if tensor == "" || len(recs) == 0 {
				continue
			}
			rec := recs[0]
			rep.Tensors = append(rep.Tensors, rec.Row)
			k := [3]string{string(kind), rec.Row.Role, rec.Row.Scheme}
			if sums[k] == nil {
				sums[k] = &roleAcc{}
			}
			sums[k].add(rec.Row, rec.M, rec.RTN)
		}
	}
	finishReport(rep, sums)
	rep.Calibration = calibReport(p, rep.Tensors)
	return rep
}
