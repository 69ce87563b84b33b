// Package checkpoint reads and writes the device manager's checkpoint in
// the upstream kubelet's format: the file kubelet_internal_checkpoint in
// the device plugin directory, JSON of {Data, Checksum}, where Checksum is
// the FNV-32a hash of the data printed by apimachinery's dump.ForHash.
// That print names the Go types (checkpoint.checkpointData,
// checkpoint.PodDevicesEntry, checkpoint.DevicesPerNUMA), so this package
// and its types keep upstream's names: a checkpoint either kubelet wrote
// verifies in the other.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/dump"

	"github.com/skiff-sh/skiff/internal/atomicfile"
)

// FileName is the checkpoint's file name in the device plugin directory.
const FileName = "kubelet_internal_checkpoint"

// ErrNotFound is returned by Read when there is no checkpoint.
var ErrNotFound = errors.New("checkpoint is not found")

// DevicesPerNUMA are a container's device IDs by NUMA node (-1: devices
// without topology).
type DevicesPerNUMA map[int64][]string

// PodDevicesEntry is one container's devices of one resource and the
// plugin's Allocate answer for them (a marshalled
// ContainerAllocateResponse).
type PodDevicesEntry struct {
	PodUID        string
	ContainerName string
	ResourceName  string
	DeviceIDs     DevicesPerNUMA
	AllocResp     []byte
}

// checkpointData is what is checksummed; its name is part of the hash.
type checkpointData struct {
	PodDeviceEntries  []PodDevicesEntry
	RegisteredDevices map[string][]string
}

// data is the file's content.
type data struct {
	Data     checkpointData
	Checksum uint64
}

// Checkpoint is the device manager's state on disk: the devices of each
// container, and the devices each resource had when last written.
type Checkpoint struct {
	Entries    []PodDevicesEntry
	Registered map[string][]string
}

func checksum(d checkpointData) uint64 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(d))
	return uint64(h.Sum32())
}

// Marshal encodes cp with its checksum.
func Marshal(cp Checkpoint) ([]byte, error) {
	d := checkpointData{PodDeviceEntries: cp.Entries, RegisteredDevices: cp.Registered}
	if d.PodDeviceEntries == nil {
		d.PodDeviceEntries = []PodDevicesEntry{}
	}
	if d.RegisteredDevices == nil {
		d.RegisteredDevices = map[string][]string{}
	}
	return json.Marshal(data{Data: d, Checksum: checksum(d)})
}

// Unmarshal decodes a checkpoint and verifies its checksum.
func Unmarshal(b []byte) (Checkpoint, error) {
	var d data
	if err := json.Unmarshal(b, &d); err != nil {
		return Checkpoint{}, fmt.Errorf("decode device manager checkpoint: %w", err)
	}
	if got := checksum(d.Data); got != d.Checksum {
		return Checkpoint{}, fmt.Errorf("device manager checkpoint is corrupt: checksum %d, want %d", got, d.Checksum)
	}
	return Checkpoint{Entries: d.Data.PodDeviceEntries, Registered: d.Data.RegisteredDevices}, nil
}

// Read reads the checkpoint in dir; ErrNotFound when there is none.
func Read(dir string) (Checkpoint, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if errors.Is(err, os.ErrNotExist) {
		return Checkpoint{}, ErrNotFound
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("read device manager checkpoint: %w", err)
	}
	return Unmarshal(b)
}

// Write replaces the checkpoint in dir atomically: a synced temporary
// file renamed over it, as upstream's file store.
func Write(dir string, cp Checkpoint) error {
	b, err := Marshal(cp)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, FileName), b, 0o600); err != nil {
		return fmt.Errorf("write device manager checkpoint: %w", err)
	}
	return nil
}
