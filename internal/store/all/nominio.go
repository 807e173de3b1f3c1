//go:build homesnap_nominio

package all

import "github.com/homesnap/homesnap/internal/store"

func init() {
	store.LeftOut("minio", "MinIO", "homesnap_nominio")
}
