// Command grpchealth is a tiny gRPC server that only implements the gRPC
// health checking protocol (grpc.health.v1.Health). The end-to-end tests
// run it in the image skiff.local/grpchealth:1 (built by
// hack/containerd.sh) as the target of grpc probes.
//
//	grpchealth -port 9000 -serving ok -not-serving down
//
// The server as a whole ("") and every -serving name answer SERVING, every
// -not-serving name NOT_SERVING; any other name is unknown (NotFound).
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	port := flag.Int("port", 9000, "port to listen on")
	serving := flag.String("serving", "", "comma-separated services that are SERVING")
	notServing := flag.String("not-serving", "", "comma-separated services that are NOT_SERVING")
	flag.Parse()

	l, err := net.Listen("tcp", fmt.Sprintf(":%d", *port))
	if err != nil {
		log.Fatal(err)
	}
	hs := health.NewServer() // "" is SERVING
	for _, s := range split(*serving) {
		hs.SetServingStatus(s, healthpb.HealthCheckResponse_SERVING)
	}
	for _, s := range split(*notServing) {
		hs.SetServingStatus(s, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; srv.Stop() }()
	log.Printf("grpchealth listening on %s", l.Addr())
	if err := srv.Serve(l); err != nil {
		log.Fatal(err)
	}
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
