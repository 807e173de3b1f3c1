// Package all links the store backends into a binary; the mains import it
// for its side effect of registering the URL schemes. Every backend is in
// by default. A build tag leaves one out, for a smaller binary
// (docs/development.md: Smaller builds):
//
//	homesnap_nos3     s3://            the AWS SDK
//	homesnap_nominio  minio://         minio-go
//	homesnap_nogcs    gs://            the Google Cloud SDK, with gRPC and OpenTelemetry
//	homesnap_noazure  azblob://, az:// the Azure SDK
//
// The local directory store (a path, file://) is always in. A URL of a
// backend left out fails naming its tag (store.SchemeError), not as an
// unknown scheme.
package all

import _ "github.com/homesnap/homesnap/internal/store/file"
