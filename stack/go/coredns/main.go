// Command coredns is the upstream CoreDNS with only the plugins the local cluster's
// DNS uses (no cloud providers, no forwarding: nothing outside is reachable). It
// exists so that the local stack can build a pinned CoreDNS from the Go module proxy.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives are the plugins above, in the order of CoreDNS's plugin.cfg (the order
// in which a query passes through them).
var directives = []string{"bind", "ready", "health", "errors", "cache", "kubernetes"}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
