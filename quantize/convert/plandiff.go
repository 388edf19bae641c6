package convert

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// planFacts are the parts of a plan its ID is made of, by name, as the journal records them so
// that a refused resume can say what differs: the source directory and shards, each option, the
// config file given, the calibration statistics.
func (p *Plan) planFacts() map[string]string {
	f := map[string]string{"source": p.Source.Dir}
	h := sha256.New()
	for _, s := range p.Source.Shards {
		fmt.Fprintf(h, "%s %d %d %d\n", s.Name, s.Size, s.Header.DataStart, s.ModTime.UnixNano())
	}
	f["source shards"] = hex.EncodeToString(h.Sum(nil))[:16]
	var opts map[string]any
	if b, err := json.Marshal(p.Options); err == nil && json.Unmarshal(b, &opts) == nil {
		for k, v := range opts {
			b, _ := json.Marshal(v)
			f["option "+words(k)] = string(b)
		}
	}
	f["config file"] = p.ConfigSHA256
	if c := p.Options.Calib; c != nil {
		f["calibration statistics"] = c.ID
	}
	return f
}

// words spells a Go field name as words: GroupSize is "group size".
func words(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) && i > 0 && !unicode.IsUpper(rune(s[i-1])) {
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// planDiff says how the plan facts now differ from those recorded then, e.g. "option group
// size was 64, is 32; source shards changed"; "" when then is empty (a journal of an earlier
// version) or nothing recorded differs.
func planDiff(then, now map[string]string) string {
	if len(then) == 0 {
		return ""
	}
	keys := map[string]bool{}
	for k := range then {
		keys[k] = true
	}
	for k := range now {
		keys[k] = true
	}
	var ks []string
	for k := range keys {
		if then[k] != now[k] {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	var d []string
	for _, k := range ks {
		switch k {
		case "source shards":
			d = append(d, "the source shards changed (size, header or modification time)")
		case "config file", "calibration statistics":
			d = append(d, "another "+k)
		default:
			d = append(d, fmt.Sprintf("%s was %s, is %s", k, orNone(then[k]), orNone(now[k])))
		}
	}
	return strings.Join(d, "; ")
}

func orNone(s string) string {
	if s == "" {
		return "unset"
	}
	return s
}

// otherPlanError is ErrOtherPlan for dir, saying what differs when the journal recorded it.
func otherPlanError(dir, what string, then, now map[string]string) error {
	if d := planDiff(then, now); d != "" {
		return fmt.Errorf("convert: %s%s: %w: %s", dir, what, ErrOtherPlan, d)
	}
	return fmt.Errorf("convert: %s%s: %w", dir, what, ErrOtherPlan)
}
