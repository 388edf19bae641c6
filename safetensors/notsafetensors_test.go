package safetensors

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestNotSafetensors: a file whose first bytes are JSON, a zip archive, a pickle, gzip or text is
// refused as not a safetensors file, keeping the header length sentinel; other impossible lengths
// keep the plain message.
func TestNotSafetensors(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
		sentinel         error
	}{
		{"json", `{"hidden_size": 7168, "num_hidden_layers": 61}`, "like JSON text", ErrHeaderTooLarge},
		{"zip", "PK\x03\x04" + strings.Repeat("\x00", 60), `"PK", a zip archive`, ErrInvalidHeaderLength},
		{"pickle", "\x80\x02}q\x00(X\x04\x00\x00\x00" + strings.Repeat("\x00", 8), "Python pickle", ErrHeaderTooLarge},
		{"gzip", "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + strings.Repeat("\x00", 8), "gzip", ErrInvalidHeaderLength},
		{"text", "tokenizer vocabulary, one word a line\n", "it is text", ErrHeaderTooLarge},
		{"short text", "hello wo\n", "it is text", ErrHeaderTooLarge},
	} {
		_, err := ParseHeader(bytes.NewReader([]byte(tc.data)), int64(len(tc.data)))
		if !errors.Is(err, ErrNotSafetensors) || !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q wrapping %v", tc.name, err, tc.want, tc.sentinel)
		}
	}
	// A length that is only too large stays a header length error.
	b := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0}
	if _, err := ParseHeader(bytes.NewReader(b), int64(len(b))); !errors.Is(err, ErrHeaderTooLarge) || errors.Is(err, ErrNotSafetensors) {
		t.Errorf("binary length: %v", err)
	}
}
