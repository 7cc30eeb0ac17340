// Command print prints what version.Get returns, for the package's test.
package main

import (
	"fmt"

	"github.com/initlock/initlock/internal/version"
)

func main() {
	i := version.Get()
	fmt.Print(i.Version, "|", i.Revision, "|", i.String())
}
