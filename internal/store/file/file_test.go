package file_test

import (
	"testing"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
	"github.com/homesnap/homesnap/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := file.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
