package s3

import "github.com/aws/aws-sdk-go-v2/service/s3"

// Client exposes the SDK client to tests that inspect the bucket directly.
func (s *Store) Client() *s3.Client { return s.client }

func (s *Store) Bucket() string { return s.bucket }

var Completed = (*Store).completed
