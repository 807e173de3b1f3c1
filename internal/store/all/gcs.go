//go:build !homesnap_nogcs

package all

import _ "github.com/homesnap/homesnap/internal/store/gcs"
