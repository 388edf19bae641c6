package engines

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// ErrMixedShards: the parts of one fused module disagree on being ignored; both engines raise
// ValueError ("requires all to use the same scheme") while building the model.
var ErrMixedShards = errors.New("the parts of a fused module disagree on ignore")

var (
	reCacheMu sync.Mutex
	reCache   = map[string]*regexp.Regexp{}
)

// pyMatch is Python's re.match(pattern, value): the pattern anchored at the start of value only.
// A pattern Go cannot compile matches nothing (the engines would raise; Check reports it).
func pyMatch(pattern, value string) bool {
	reCacheMu.Lock()
	re, ok := reCache[pattern]
	if !ok {
		re, _ = regexp.Compile(`^(?:` + pattern + `)`)
		reCache[pattern] = re
	}
	reCacheMu.Unlock()
	return re != nil && re.MatchString(value)
}

// equalOrRegexMatch is _is_equal_or_regex_match of compressed_tensors/utils.py: "re:" entries
// with re.match; otherwise a case-insensitive substring when contains is set, else equality.
func equalOrRegexMatch(value, target string, contains bool) bool {
	if p, ok := strings.CutPrefix(target, "re:"); ok {
		return pyMatch(p, value)
	}
	if contains {
		return strings.Contains(strings.ToLower(value), strings.ToLower(target))
	}
	return target == value
}

// ignoreMatch is check_equal_or_regex_match: any ignore entry, substring matching on.
func ignoreMatch(name string, ignore []string) bool {
	for _, t := range ignore {
		if equalOrRegexMatch(name, t, true) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ShouldIgnore is should_ignore_layer of compressed_tensors/utils.py (the same in both engines):
// a module whose last name component is a key of fused (the model's packed_modules_mapping) and
// that is not itself listed is ignored when its parts are, and the parts must agree
// (ErrMixedShards); any other module is matched by its own name.
func ShouldIgnore(layer string, ignore []string, fused map[string][]string) (bool, error) {
	proj := layer[strings.LastIndexByte(layer, '.')+1:]
	parts, ok := fused[proj]
	if !ok || contains(ignore, layer) {
		return ignoreMatch(layer, ignore), nil
	}
	var first bool
	for i, p := range parts {
		got := ignoreMatch(strings.Replace(layer, proj, p, -1), ignore)
		if i == 0 {
			first = got
		} else if got != first {
			return false, fmt.Errorf("%w: %s: %v", ErrMixedShards, layer, parts)
		}
	}
	return first, nil
}

// FindTarget is find_matched_target of compressed_tensors/utils.py: the first target equal to
// (or "re:"-matching) the layer name; else the first target contained in the module's class name
// (every Linear the engines build has "Linear" in its class name); else, for a fused layer, the
// target of its first part when every part matches one. ok is false when nothing matches (the
// engines raise "Unable to find matching target").
func FindTarget(layer, class string, targets []string, fused map[string][]string) (string, bool) {
	for _, t := range targets {
		if equalOrRegexMatch(layer, t, false) {
			return t, true
		}
	}
	for _, t := range targets {
		if equalOrRegexMatch(class, t, true) {
			return t, true
		}
	}
	keys := make([]string, 0, len(fused))
	for k := range fused {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		parts := fused[key]
		if !strings.HasSuffix(layer, key) {
			continue
		}
		var first string
		for i, p := range parts {
			name := strings.Replace(layer, key, p, -1)
			hit := ""
			for _, t := range targets {
				if equalOrRegexMatch(name, t, false) {
					hit = t
					break
				}
			}
			if hit == "" {
				return "", false
			}
			if i == 0 {
				first = hit
			}
		}
		return first, true
	}
	return "", false
}
