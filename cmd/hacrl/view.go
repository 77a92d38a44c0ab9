package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"

	"github.com/hacrl/hacrl/view"
	"github.com/spf13/cobra"
)

func viewCmd() *cobra.Command {
	var addr, key string
	cmd := &cobra.Command{
		Use:   "view OUT...",
		Short: "Watch runs in a web browser: live curves and every agent's rollouts",
		Long: `Serve a web page that shows runs while they train or after: curves of
every agent's metrics (several runs overlaid), the evaluation table, and
the rollout browser (each logged step's prompts with every agent's
responses, rewards, lengths, and each learner's advantage, omega, ratio and
clip state). It updates itself as the runs write metrics.jsonl and rollout
logs; a run that has not written metrics yet appears when it does.

OUT is a run's output directory (metrics.jsonl, config.yaml, rollouts/),
or an experiment's archived cell (metrics.jsonl.gz, cell.yaml). The page
and its scripts are built into hacrl: nothing is fetched from the internet.
The view only reads the runs.

It prints the address to open on standard output and serves until
interrupted (SIGINT, SIGTERM), then exits with status 0.

It binds to 127.0.0.1:8080 (--addr). On an address that is not loopback it
needs a key (--key KEY, or $HACRL_VIEW_KEY) and refuses to start without
one; with a key every request needs it: "Authorization: Bearer KEY", or the
cookie the page's first load as http://HOST:PORT/?key=KEY sets (the printed
address carries it). The JSON API the page reads (/api/runs, /api/metrics,
/api/rollouts, /api/events) is described in package view's documentation.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if key == "" {
				key = os.Getenv(view.KeyEnv)
			}
			if err := view.CheckAddr(addr, key); err != nil {
				if errors.Is(err, view.ErrNeedKey) {
					return usage("--addr %s is not loopback: %v", addr, err)
				}
				return usage("--addr: %v", err)
			}
			srv, err := view.New(view.Config{Runs: args, Key: key})
			if err != nil {
				return err
			}
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("view: %w", err)
			}
			onInterrupt("stopping the view")
			fmt.Fprintln(cmd.OutOrStdout(), viewURL(l.Addr().(*net.TCPAddr), addr, key))
			for i, dir := range args {
				fmt.Fprintf(cmd.ErrOrStderr(), "run %d: %s\n", i, dir)
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "serving until interrupted (Ctrl-C)")
			if err := srv.Serve(cmd.Context(), l); err != nil {
				return err
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "stopped")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", view.DefaultAddr, "address to listen on (host:port); off loopback it needs --key")
	f.StringVar(&key, "key", "", "require this key on every request (default: $"+view.KeyEnv+"; none when empty)")
	return cmd
}

// viewURL is the address to open: the host given (for an unspecified one,
// every interface, this machine's name), the port bound, and ?key= when
// there is a key.
func viewURL(bound *net.TCPAddr, addr, key string) string {
	host, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
		}
	}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(host, fmt.Sprint(bound.Port)), Path: "/"}
	if key != "" {
		u.RawQuery = "key=" + url.QueryEscape(key)
	}
	return u.String()
}
