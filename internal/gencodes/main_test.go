package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The generated file is what the table says: a code added to codes.txt
// without go generate, or an edit of codes_gen.go by hand, fails here.
func TestGeneratedFileIsCurrent(t *testing.T) {
	table, err := os.Open("../../codes.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer table.Close()
	want, err := Generate(table)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../codes_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("codes_gen.go is not what codes.txt makes: run go generate in the module's root")
	}
}

func TestGenerateRefusesBadTables(t *testing.T) {
	for name, table := range map[string]string{
		"columns":    "store | A | ERR_A | a\n",
		"section":    "nowhere | A | ERR_A | a | doc\n",
		"name twice": "store | A | ERR_A | a | doc\nstore | A | ERR_B | b | doc\n",
		"wire twice": "store | A | ERR_A | a | doc\nstore | B | ERR_A | b | doc\n",
	} {
		if _, err := Generate(strings.NewReader(table)); err == nil {
			t.Errorf("%s: Generate accepted %q", name, table)
		}
	}
}
