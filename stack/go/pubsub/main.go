// Command pubsub-server serves Google's in-memory Pub/Sub server, pstest, on a
// fixed loopback port, with runtime fault switches for the Pub/Sub source's tests.
//
// pstest builds its own grpc.Server and takes no server options, so its
// Publisher, Subscriber and SchemaService implementation (Server.GServer) is
// served here on a grpc.Server of ours whose interceptors (intercept.go) apply
// the switches (faults.go). pstest still opens a listener of its own on an
// ephemeral loopback port; nothing uses it. The switches are flipped over HTTP
// (control.go).
//
//	pubsub-server -port 18085 -control-port 18086
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc"
)

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on (both ports)")
	port := flag.Int("port", 18085, "gRPC port: what PUBSUB_EMULATOR_HOST names")
	controlPort := flag.Int("control-port", 18086, "HTTP port of the fault switches")
	flag.Parse()
	if err := run(*host, *port, *controlPort); err != nil {
		fmt.Fprintln(os.Stderr, "pubsub-server:", err)
		os.Exit(1)
	}
}

func run(host string, port, controlPort int) error {
	fake := pstest.NewServerWithAddress(net.JoinHostPort(host, "0"))
	defer fake.Close()
	faults := newFaults(&fake.GServer)

	listener, err := net.Listen("tcp", net.JoinHostPort(host, fmt.Sprint(port)))
	if err != nil {
		return fmt.Errorf("gRPC port: %w", err)
	}
	server := grpc.NewServer(
		grpc.ChainUnaryInterceptor(faults.unary),
		grpc.ChainStreamInterceptor(faults.stream),
	)
	pb.RegisterPublisherServer(server, &fake.GServer)
	pb.RegisterSubscriberServer(server, &fake.GServer)
	pb.RegisterSchemaServiceServer(server, &fake.GServer)

	control, err := net.Listen("tcp", net.JoinHostPort(host, fmt.Sprint(controlPort)))
	if err != nil {
		return fmt.Errorf("control port: %w", err)
	}
	go func() { _ = http.Serve(control, controlHandler(faults)) }()

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		server.Stop()
	}()
	log.Printf("pstest serving Pub/Sub on %s, fault switches on http://%s", listener.Addr(), control.Addr())
	return server.Serve(listener)
}
