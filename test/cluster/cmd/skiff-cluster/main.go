// Command skiff-cluster starts and stops a local Kubernetes control plane
// (package github.com/skiff-sh/skiff/test/cluster) that outlives it:
//
//	skiff-cluster up --dir D [--api-port 6443] [--bin-dir B] [--advertise-address IP]
//	skiff-cluster down --dir D
//	skiff-cluster status --dir D
//	skiff-cluster node-kubeconfig --dir D --node NAME --out FILE
//	skiff-cluster bootstrap-kubeconfig --dir D --out FILE
//
// up is idempotent: with a control plane already running in D it only
// prints where it is. up prints the admin kubeconfig path on the last line
// of its standard output.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/skiff-sh/skiff/test/cluster"
)

const usage = `usage:
  skiff-cluster up --dir D [--api-port 6443] [--bin-dir B] [--advertise-address IP]
                   [--node-monitor-grace-period 40s] [--cluster-signing-duration D]
  skiff-cluster down --dir D
  skiff-cluster status --dir D
  skiff-cluster node-kubeconfig --dir D --node NAME --out FILE
  skiff-cluster bootstrap-kubeconfig --dir D --out FILE
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "up":
		err = up(args)
	case "down":
		err = down(args)
	case "status":
		err = status(args)
	case "node-kubeconfig":
		err = nodeKubeconfig(args)
	case "bootstrap-kubeconfig":
		err = bootstrapKubeconfig(args)
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "skiff-cluster: unknown command %q\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "skiff-cluster:", err)
		os.Exit(1)
	}
}

func newFlags(name string) (*flag.FlagSet, *string) {
	fl := flag.NewFlagSet("skiff-cluster "+name, flag.ExitOnError)
	dir := fl.String("dir", "", "the cluster's state directory (required)")
	return fl, dir
}

func parse(fl *flag.FlagSet, args []string, dir *string, required ...*string) {
	fl.Parse(args)
	if fl.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "%s: unexpected arguments %q\n", fl.Name(), fl.Args())
		os.Exit(2)
	}
	for _, r := range append([]*string{dir}, required...) {
		if *r == "" {
			fmt.Fprintf(os.Stderr, "%s: missing a required flag\n", fl.Name())
			fl.Usage()
			os.Exit(2)
		}
	}
}

func up(args []string) error {
	fl, dir := newFlags("up")
	var o cluster.Options
	fl.IntVar(&o.APIPort, "api-port", 0, "the apiserver's secure port (0: a free one, or the one used last time in --dir)")
	fl.StringVar(&o.BinDir, "bin-dir", "", "where kube-apiserver etc. are (default <repo>/_output/bin)")
	fl.StringVar(&o.AdvertiseAddress, "advertise-address", "", "the apiserver's non-loopback address (default: the default route's interface address)")
	fl.DurationVar(&o.NodeMonitorGracePeriod, "node-monitor-grace-period", 0, "kube-controller-manager --node-monitor-grace-period (default 40s)")
	fl.DurationVar(&o.ClusterSigningDuration, "cluster-signing-duration", 0, "kube-controller-manager --cluster-signing-duration (default: upstream's)")
	fl.BoolVar(&o.EtcdFsync, "etcd-fsync", false, "keep etcd's fsyncs (default: --unsafe-no-fsync)")
	parse(fl, args, dir)
	o.Dir, o.Detached = *dir, true

	if c, err := cluster.Load(*dir); err == nil {
		if c.Check() == nil {
			if o.APIPort != 0 && o.APIPort != c.Options().APIPort {
				return fmt.Errorf("already running in %s on port %d, not %d (skiff-cluster down first)", *dir, c.Options().APIPort, o.APIPort)
			}
			fmt.Println("skiff-cluster: already running")
			report(c)
			return nil
		}
		if c.Running() {
			fmt.Fprintln(os.Stderr, "skiff-cluster: a partly running control plane found; stopping it first")
			if err := c.Stop(); err != nil {
				return err
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}

	// Ctrl-C during start: Start stops what it started.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	c, err := cluster.Start(ctx, o)
	if err != nil {
		return err
	}
	fmt.Printf("skiff-cluster: started in %s\n", time.Since(start).Round(100*time.Millisecond))
	report(c)
	return nil
}

func report(c *cluster.Cluster) {
	pids := c.PIDs()
	names := make([]string, 0, len(pids))
	for n := range pids {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Printf("  apiserver: %s\n", c.APIServerURL())
	for _, n := range names {
		fmt.Printf("  %-24s pid %-8d log %s\n", n, pids[n], c.LogFile(n))
	}
	fmt.Printf("  kubectl --kubeconfig %s get nodes\n", c.AdminKubeconfig())
	fmt.Println(c.AdminKubeconfig())
}

func down(args []string) error {
	fl, dir := newFlags("down")
	parse(fl, args, dir)
	c, err := cluster.Load(*dir)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Println("skiff-cluster: not running")
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.Stop(); err != nil {
		return err
	}
	fmt.Println("skiff-cluster: stopped")
	return nil
}

func status(args []string) error {
	fl, dir := newFlags("status")
	parse(fl, args, dir)
	c, err := cluster.Load(*dir)
	if err != nil {
		return err
	}
	if err := c.Check(); err != nil {
		return err
	}
	fmt.Println("skiff-cluster: running")
	report(c)
	return nil
}

func loadRunning(dir string) (*cluster.Cluster, error) {
	c, err := cluster.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("no control plane in %s: %w", dir, err)
	}
	return c, nil
}

func nodeKubeconfig(args []string) error {
	fl, dir := newFlags("node-kubeconfig")
	node := fl.String("node", "", "the node name: the certificate is for system:node:<name> (required)")
	out := fl.String("out", "", "the kubeconfig file to write (required)")
	parse(fl, args, dir, node, out)
	c, err := loadRunning(*dir)
	if err != nil {
		return err
	}
	return c.NodeKubeconfig(*node, *out)
}

func bootstrapKubeconfig(args []string) error {
	fl, dir := newFlags("bootstrap-kubeconfig")
	out := fl.String("out", "", "the kubeconfig file to write (required)")
	parse(fl, args, dir, out)
	c, err := loadRunning(*dir)
	if err != nil {
		return err
	}
	if err := c.Check(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	token, err := c.CreateBootstrapToken(ctx)
	if err != nil {
		return err
	}
	return c.BootstrapKubeconfig(token, *out)
}
