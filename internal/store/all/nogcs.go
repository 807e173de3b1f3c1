//go:build homesnap_nogcs

package all

import "github.com/homesnap/homesnap/internal/store"

func init() {
	store.LeftOut("gs", "GCS", "homesnap_nogcs")
}
