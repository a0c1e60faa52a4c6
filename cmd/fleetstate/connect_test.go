package main

import (
	"slices"
	"testing"
)

func TestSplitURLs(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"one", "http://a/mcp", []string{"http://a/mcp"}},
		{"several", "http://a/mcp,http://b/mcp", []string{"http://a/mcp", "http://b/mcp"}},
		{"blanks", " http://a/mcp , ,http://b/mcp,", []string{"http://a/mcp", "http://b/mcp"}},
		{"none", " , ", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := splitURLs(tc.in); !slices.Equal(got, tc.want) {
				t.Errorf("splitURLs(%q) = %q; want %q", tc.in, got, tc.want)
			}
		})
	}
}
