//go:build !homesnap_nos3

package all

import _ "github.com/homesnap/homesnap/internal/store/s3"
