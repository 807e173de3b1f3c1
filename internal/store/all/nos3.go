//go:build homesnap_nos3

package all

import "github.com/homesnap/homesnap/internal/store"

func init() {
	store.LeftOut("s3", "S3", "homesnap_nos3")
}
