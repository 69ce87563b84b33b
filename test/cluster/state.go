package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

const stateFile = "state.json"

// state is <Dir>/state.json: what Load needs to find a cluster again.
type state struct {
	Options struct {
		BinDir                 string        `json:"binDir"`
		APIPort                int           `json:"apiPort"`
		EtcdPort               int           `json:"etcdPort"`
		EtcdPeerPort           int           `json:"etcdPeerPort"`
		ControllerManagerPort  int           `json:"controllerManagerPort"`
		SchedulerPort          int           `json:"schedulerPort"`
		AdvertiseAddress       string        `json:"advertiseAddress"`
		ServiceCIDR            string        `json:"serviceCIDR"`
		ClusterCIDR            string        `json:"clusterCIDR"`
		NodeMonitorGracePeriod time.Duration `json:"nodeMonitorGracePeriod"`
		ClusterSigningDuration time.Duration `json:"clusterSigningDuration"`
	} `json:"options"`
	APIServerURL string     `json:"apiServerURL"`
	Processes    []*process `json:"processes"` // empty once stopped
}

// writeState records the resolved options and the processes in
// <Dir>/state.json and one <Dir>/run/<name>.pid per running process.
func (c *Cluster) writeState() error {
	var s state
	o := c.opts
	s.Options.BinDir = o.BinDir
	s.Options.APIPort, s.Options.EtcdPort, s.Options.EtcdPeerPort = o.APIPort, o.EtcdPort, o.etcdPeerPort
	s.Options.ControllerManagerPort, s.Options.SchedulerPort = o.controllerManagerPort, o.schedulerPort
	s.Options.AdvertiseAddress, s.Options.ServiceCIDR, s.Options.ClusterCIDR = o.AdvertiseAddress, o.ServiceCIDR, o.ClusterCIDR
	s.Options.NodeMonitorGracePeriod, s.Options.ClusterSigningDuration = o.NodeMonitorGracePeriod, o.ClusterSigningDuration
	s.APIServerURL = c.apiURL
	c.mu.Lock()
	s.Processes = append([]*process(nil), c.procs...)
	c.mu.Unlock()
	data, err := json.MarshalIndent(&s, "", "  ")
	if err != nil {
		return err
	}
	if err := c.writePIDFiles(s.Processes); err != nil {
		return err
	}
	return writeFileAtomic(c.path(stateFile), data, 0o644)
}

// writePIDFiles writes <Dir>/run/<name>.pid for each of procs and removes
// the other files there.
func (c *Cluster) writePIDFiles(procs []*process) error {
	run := c.path("run")
	if err := os.MkdirAll(run, 0o755); err != nil {
		return err
	}
	live := map[string]bool{}
	for _, p := range procs {
		live[p.Name+".pid"] = true
		if err := writeFileAtomic(filepath.Join(run, p.Name+".pid"), []byte(strconv.Itoa(p.PID)+"\n"), 0o644); err != nil {
			return err
		}
	}
	if ents, err := os.ReadDir(run); err == nil {
		for _, e := range ents {
			if !live[e.Name()] {
				os.Remove(filepath.Join(run, e.Name()))
			}
		}
	}
	return nil
}

// Load finds the cluster recorded in dir's state file, e.g. one started by
// `skiff-cluster up` in another process, whether or not it still runs
// (see Running and Check). Stop on the result stops its processes.
func Load(dir string) (*Cluster, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stateFile), err)
	}
	c := &Cluster{apiURL: s.APIServerURL, procs: s.Processes}
	c.opts = Options{
		Dir:                    dir,
		BinDir:                 s.Options.BinDir,
		APIPort:                s.Options.APIPort,
		EtcdPort:               s.Options.EtcdPort,
		AdvertiseAddress:       s.Options.AdvertiseAddress,
		ServiceCIDR:            s.Options.ServiceCIDR,
		ClusterCIDR:            s.Options.ClusterCIDR,
		NodeMonitorGracePeriod: s.Options.NodeMonitorGracePeriod,
		ClusterSigningDuration: s.Options.ClusterSigningDuration,
		Detached:               true,
		etcdPeerPort:           s.Options.EtcdPeerPort,
		controllerManagerPort:  s.Options.ControllerManagerPort,
		schedulerPort:          s.Options.SchedulerPort,
	}
	if err := c.initClient(); err != nil {
		return nil, err
	}
	return c, nil
}
