// Command etcd is the upstream etcd server, unchanged: it exists so that the local
// stack can build a pinned etcd release from the Go module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
