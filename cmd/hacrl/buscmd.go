package main

import (
	"fmt"
	"os"

	"github.com/hacrl/hacrl/bus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// serverFlags configure hacrl bus's NATS server.
type serverFlags struct {
	listen                    string
	nkeys                     []string
	certFile, keyFile, caFile string
	cluster, clusterListen    string
	routes                    []string
}

func (s *serverFlags) register(f *pflag.FlagSet) {
	f.StringVar(&s.listen, "bus-listen", "", "the server's client address host:port (default 127.0.0.1 on a free port; any other host needs $"+busTokenEnv+" or --bus-nkeys)")
	f.StringSliceVar(&s.nkeys, "bus-nkeys", nil, "admit NATS nkey users with these public keys (U…) instead of a token")
	f.StringVar(&s.certFile, "bus-tls-cert", "", "server certificate (PEM): clients must speak TLS")
	f.StringVar(&s.keyFile, "bus-tls-key", "", "server key (PEM), with --bus-tls-cert")
	f.StringVar(&s.caFile, "bus-tls-ca", "", "CA certificates (PEM): clients must present a certificate it signed")
	f.StringVar(&s.cluster, "bus-cluster", "", "join a NATS cluster of this name (every server the same)")
	f.StringVar(&s.clusterListen, "bus-cluster-listen", "", "the route address host:port other servers of the cluster reach")
	f.StringSliceVar(&s.routes, "bus-routes", nil, "other servers' route URLs, nats-route://host:port")
}

// options are the server's options with its store in dir, admitting the
// token in $HACRL_BUS_TOKEN or the nkeys given.
func (s *serverFlags) options(dir string) bus.ServerOptions {
	auth := bus.Auth{Token: os.Getenv(busTokenEnv), NKeys: s.nkeys}
	return bus.ServerOptions{
		Dir: dir, Listen: s.listen, Auth: auth,
		TLS:     bus.TLSFiles{CertFile: s.certFile, KeyFile: s.keyFile, CAFile: s.caFile},
		Cluster: bus.ClusterOptions{Name: s.cluster, Listen: s.clusterListen, Routes: s.routes},
	}
}

func busCmd() *cobra.Command {
	var (
		store string
		s     serverFlags
	)
	cmd := &cobra.Command{
		Use:   "bus --store DIR",
		Short: "Run a NATS JetStream server for agents on several machines (hacrl agent --bus)",
		Long: `Run the NATS JetStream server of hacrl, file-backed in --store, for runs whose
agents are processes on several machines (hacrl agent --bus). It runs until
interrupted; started again on the same store it has every step published
before. Any NATS server or cluster with JetStream serves as well.

It listens on 127.0.0.1 unless --bus-listen says otherwise, and a server
reachable from other machines admits only clients with the token in
$` + busTokenEnv + ` or the nkeys of --bus-nkeys; --bus-tls-cert/--bus-tls-key
make clients speak TLS, and --bus-tls-ca makes them present certificates.
Three servers with --bus-cluster and --bus-routes form a cluster that keeps a
run (hacrl agent --replicas 3) through the loss of one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			onInterrupt("stopping the bus server; its store keeps every step published, for a server started again on it")
			if store == "" {
				return usage("--store DIR is required (the server's JetStream files)")
			}
			srv, err := bus.StartServer(cmd.Context(), s.options(store))
			if err != nil {
				return err
			}
			defer srv.Close()
			fmt.Fprintf(cmd.ErrOrStderr(), "bus: %s (store %s)", srv.URL(), store)
			if u := srv.ClusterURL(); u != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), ", cluster %s at %s", s.cluster, u)
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "; interrupt to stop")
			<-cmd.Context().Done()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", "the server's JetStream store directory (required)")
	s.register(f)
	return cmd
}
