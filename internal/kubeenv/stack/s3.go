package stack

import (
	"context"
	"strings"
	"time"
)

// S3 is a running s3-server (hack/s3): a real S3 endpoint on 127.0.0.1,
// in memory, with one bucket.
type S3 struct {
	*Proc
	// URL is the endpoint, http://127.0.0.1:port.
	URL string
	// Bucket is the bucket it created at start.
	Bucket string
}

// StartS3 starts the S3 server with bucket and waits until it listens.
func StartS3(ctx context.Context, b Binaries, dir, bucket string) (*S3, error) {
	p, err := startProc(dir, "s3-server", b.path(BinS3), []string{"-addr", "127.0.0.1:0", "-bucket", bucket}, nil)
	if err != nil {
		return nil, err
	}
	rest, err := p.waitLogLine(ctx, 30*time.Second, "s3-server: listening on ")
	if err != nil {
		p.Stop()
		return nil, err
	}
	return &S3{Proc: p, URL: strings.TrimSpace(rest), Bucket: bucket}, nil
}
