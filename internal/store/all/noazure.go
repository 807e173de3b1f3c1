//go:build homesnap_noazure

package all

import "github.com/homesnap/homesnap/internal/store"

func init() {
	store.LeftOut("azblob", "Azure Blob", "homesnap_noazure")
	store.LeftOut("az", "Azure Blob", "homesnap_noazure")
}
