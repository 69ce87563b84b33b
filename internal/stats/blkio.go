package stats

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// blkioV1 reads the v1 blkio throttle files, which count every device's
// I/O whatever the scheduler (the others need CFQ or BFQ).
func blkioV1(dir string) []diskIO {
	var out []diskIO
	byDev := map[[2]uint64]int{}
	for _, f := range []struct {
		file  string
		bytes bool
	}{{"blkio.throttle.io_service_bytes_recursive", true}, {"blkio.throttle.io_serviced_recursive", false}} {
		b, err := os.ReadFile(filepath.Join(dir, f.file))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			// "8:0 Read 4096"; the last line is "Total N".
			fields := strings.Fields(line)
			if len(fields) != 3 {
				continue
			}
			major, minor, ok := parseDevice(fields[0])
			v, err := strconv.ParseUint(fields[2], 10, 64)
			if !ok || err != nil {
				continue
			}
			d := devEntry(&out, byDev, major, minor)
			if f.bytes {
				d.bytes[fields[1]] = v
			} else {
				d.ios[fields[1]] = v
			}
		}
	}
	return out
}

// ioStatV2 reads io.stat: "8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0".
func ioStatV2(file string) []diskIO {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var out []diskIO
	byDev := map[[2]uint64]int{}
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		major, minor, ok := parseDevice(fields[0])
		if !ok {
			continue
		}
		d := devEntry(&out, byDev, major, minor)
		for _, kv := range fields[1:] {
			k, vs, _ := strings.Cut(kv, "=")
			v, err := strconv.ParseUint(vs, 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "rbytes":
				d.bytes["Read"] = v
			case "wbytes":
				d.bytes["Write"] = v
			case "dbytes":
				d.bytes["Discard"] = v
			case "rios":
				d.ios["Read"] = v
			case "wios":
				d.ios["Write"] = v
			case "dios":
				d.ios["Discard"] = v
			}
		}
	}
	return out
}

func devEntry(out *[]diskIO, byDev map[[2]uint64]int, major, minor uint64) *diskIO {
	k := [2]uint64{major, minor}
	i, ok := byDev[k]
	if !ok {
		i = len(*out)
		byDev[k] = i
		*out = append(*out, diskIO{major: major, minor: minor, bytes: map[string]uint64{}, ios: map[string]uint64{}})
	}
	return &(*out)[i]
}

func parseDevice(s string) (major, minor uint64, ok bool) {
	a, b, found := strings.Cut(s, ":")
	if !found {
		return 0, 0, false
	}
	major, err1 := strconv.ParseUint(a, 10, 64)
	minor, err2 := strconv.ParseUint(b, 10, 64)
	return major, minor, err1 == nil && err2 == nil
}

// deviceNames names block devices "/dev/<name>" from
// /sys/dev/block/<major>:<minor>/uevent, as cAdvisor's machine disk map;
// names are cached, a device without one is "".
type deviceNames struct {
	sys   string // /sys
	mu    sync.Mutex
	names map[[2]uint64]string
}

func (d *deviceNames) name(major, minor uint64) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := [2]uint64{major, minor}
	if n, ok := d.names[k]; ok {
		return n
	}
	if d.names == nil {
		d.names = map[[2]uint64]string{}
	}
	n := ""
	file := filepath.Join(d.sys, "dev", "block", strconv.FormatUint(major, 10)+":"+strconv.FormatUint(minor, 10), "uevent")
	if b, err := os.ReadFile(file); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "DEVNAME="); ok {
				n = "/dev/" + v
			}
		}
	}
	d.names[k] = n
	return n
}
