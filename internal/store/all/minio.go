//go:build !homesnap_nominio

package all

import _ "github.com/homesnap/homesnap/internal/store/minio"
