// Command copy-plugins is the entrypoint of initlock's Velero plugin image.
// "velero plugin add" runs the image as an init container of the Velero
// server with the server's plugin folder mounted at /target; the image has
// no shell, so this static binary copies the plugin binaries from /plugins
// into /target (see internal/copier).
//
// Usage:
//
//	copy-plugins [-from /plugins] [-to /target]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/initlock/initlock/internal/copier"
)

func main() {
	from := flag.String("from", "/plugins", "Folder holding the plugin binaries.")
	to := flag.String("to", "/target", "Velero's plugin folder, mounted by \"velero plugin add\".")
	flag.Parse()
	copied, err := copier.Copy(*from, *to)
	if err != nil {
		fmt.Fprintf(os.Stderr, "copy-plugins: %v\n", err)
		os.Exit(1)
	}
	for _, name := range copied {
		fmt.Printf("copied %s into %s\n", name, *to)
	}
}
