package gen

import (
	"os"
	"testing"
)

func TestProfGen(t *testing.T) {
	dir := os.Getenv("GENDIR")
	os.RemoveAll(dir)
	st, err := Generate(dir, Options{Preset: os.Getenv("PRESET"), Seed: 1})
	t.Log(st, err)
}
