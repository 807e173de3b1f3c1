// Package all links every store backend into a binary; the mains import it
// for its side effect of registering the URL schemes.
package all

import (
	_ "github.com/homesnap/homesnap/internal/store/azure"
	_ "github.com/homesnap/homesnap/internal/store/file"
	_ "github.com/homesnap/homesnap/internal/store/gcs"
	_ "github.com/homesnap/homesnap/internal/store/minio"
	_ "github.com/homesnap/homesnap/internal/store/s3"
)
