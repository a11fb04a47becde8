package pulsartest

import "testing"

func TestMurmur3KnownVectors(t *testing.T) {
	for in, want := range map[string]uint32{
		"":      0,
		"hello": 0x248bfa47,
		"The quick brown fox jumps over the lazy dog": 0x2e4ff723,
	} {
		if got := murmur3([]byte(in)); got != want&0x7fffffff {
			t.Errorf("murmur3(%q) = %#x, want %#x", in, got, want&0x7fffffff)
		}
	}
}
