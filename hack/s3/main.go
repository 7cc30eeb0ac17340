// Command s3-server serves the S3 protocol on a local address, over
// gofakes3's in-memory backend, for the Velero servers of the real-stack
// tests and demo: a real S3 endpoint that Velero's AWS object-store plugin
// talks to with the AWS SDK, path-style, without TLS.
//
// It creates the buckets named with -bucket at start, prints one line
// "s3-server: listening on http://ADDR" on stdout once it accepts
// connections, and serves until SIGINT or SIGTERM. Everything it stores is
// lost when it exits. It checks no credentials: any access key works.
//
// It is not a mock: it parses and answers the S3 REST protocol (bucket and
// object operations, multipart uploads, listing with prefixes and
// delimiters) as gofakes3 implements it. It is meant for 127.0.0.1 only.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on; port 0 picks a free port")
	buckets := flag.String("bucket", "velero", "comma-separated buckets to create at start")
	verbose := flag.Bool("v", false, "log every request on stderr")
	flag.Parse()
	if err := run(*addr, strings.Split(*buckets, ","), *verbose); err != nil {
		fmt.Fprintf(os.Stderr, "s3-server: %v\n", err)
		os.Exit(1)
	}
}

func run(addr string, buckets []string, verbose bool) error {
	backend := s3mem.New()
	for _, b := range buckets {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		if err := backend.CreateBucket(b); err != nil {
			return fmt.Errorf("creating bucket %q: %w", b, err)
		}
	}
	opts := []gofakes3.Option{gofakes3.WithoutVersioning()}
	if verbose {
		opts = append(opts, gofakes3.WithLogger(gofakes3.StdLog(log.New(os.Stderr, "s3-server: ", log.LstdFlags))))
	} else {
		opts = append(opts, gofakes3.WithLogger(gofakes3.DiscardLog()))
	}
	faker := gofakes3.New(backend, opts...)

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: faker.Server(), ReadHeaderTimeout: 30 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Printf("s3-server: listening on http://%s\n", ln.Addr())

	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}
