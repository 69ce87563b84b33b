package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/atomicfile"
)

// The claim cache's checkpoint is upstream's: the file dra_manager_state
// in the root directory, JSON of {Data, Checksum}, where Data is the JSON
// of a DRACheckpoint and Checksum its CRC-32 (IEEE), so that either
// kubelet reads what the other wrote.
const (
	checkpointFile       = "dra_manager_state"
	checkpointKind       = "DRACheckpoint"
	checkpointAPIVersion = "checkpoint.dra.kubelet.k8s.io/v1"
)

// claimState is one prepared (or being prepared) claim: which pods use
// it, and what each driver prepared for it.
type claimState struct {
	ClaimUID    types.UID
	ClaimName   string
	Namespace   string
	PodUIDs     map[string]struct{}
	DriverState map[string]driverState
}

type driverState struct {
	Devices []device
}

// device is one prepared device and the CDI device IDs that expose it.
type device struct {
	PoolName     string
	DeviceName   string
	RequestNames []string
	CDIDeviceIDs []string
}

type checkpointData struct {
	Kind               string `json:"kind,omitempty"`
	APIVersion         string `json:"apiVersion,omitempty"`
	ClaimInfoStateList []claimState
}

type checkpointFileData struct {
	Data     string
	Checksum uint32
}

// marshalCheckpoint encodes the claims, sorted so the file is stable.
func marshalCheckpoint(claims []claimState) ([]byte, error) {
	sort.Slice(claims, func(i, j int) bool {
		if claims[i].Namespace != claims[j].Namespace {
			return claims[i].Namespace < claims[j].Namespace
		}
		return claims[i].ClaimName < claims[j].ClaimName
	})
	if claims == nil {
		claims = []claimState{}
	}
	data, err := json.Marshal(checkpointData{Kind: checkpointKind, APIVersion: checkpointAPIVersion, ClaimInfoStateList: claims})
	if err != nil {
		return nil, fmt.Errorf("encode DRA checkpoint: %w", err)
	}
	return json.Marshal(checkpointFileData{Data: string(data), Checksum: crc32.ChecksumIEEE(data)})
}

// unmarshalCheckpoint decodes a checkpoint and verifies its checksum.
func unmarshalCheckpoint(b []byte) ([]claimState, error) {
	var f checkpointFileData
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("decode DRA checkpoint: %w", err)
	}
	if got := crc32.ChecksumIEEE([]byte(f.Data)); got != f.Checksum {
		return nil, fmt.Errorf("DRA checkpoint is corrupt: checksum %d, want %d", got, f.Checksum)
	}
	var d checkpointData
	if err := json.Unmarshal([]byte(f.Data), &d); err != nil {
		return nil, fmt.Errorf("decode DRA checkpoint data: %w", err)
	}
	if d.Kind != checkpointKind || d.APIVersion != checkpointAPIVersion {
		return nil, fmt.Errorf("DRA checkpoint is of kind %q %q, want %q %q", d.Kind, d.APIVersion, checkpointKind, checkpointAPIVersion)
	}
	return d.ClaimInfoStateList, nil
}

// readCheckpoint reads the checkpoint in dir; none is no claims.
func readCheckpoint(dir string) ([]claimState, error) {
	b, err := os.ReadFile(filepath.Join(dir, checkpointFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read DRA checkpoint: %w", err)
	}
	return unmarshalCheckpoint(b)
}

// writeCheckpoint replaces the checkpoint in dir atomically: a synced
// temporary file renamed over it.
func writeCheckpoint(dir string, claims []claimState) error {
	b, err := marshalCheckpoint(claims)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, checkpointFile), b, 0o600); err != nil {
		return fmt.Errorf("write DRA checkpoint: %w", err)
	}
	return nil
}
