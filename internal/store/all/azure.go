//go:build !homesnap_noazure

package all

import _ "github.com/homesnap/homesnap/internal/store/azure"
