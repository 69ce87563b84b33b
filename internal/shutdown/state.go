package shutdown

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/atomicfile"
)

// StateFile is the name, under the root directory, of the file upstream
// keeps the last shutdown's start and end in.
const StateFile = "graceful_node_shutdown_state"

// state is that file's content, in upstream's format.
type state struct {
	StartTime time.Time `json:"startTime"`
	EndTime   time.Time `json:"endTime"`
}

// loadState reads the state file; the zero state when there is none.
func loadState(path string) (state, error) {
	var s state
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("parse %s: %w", path, err)
	}
	return s, nil
}

// storeState replaces the state file whole: a crash mid-write leaves the
// previous one.
func storeState(path string, s state) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// recordStart and recordEnd keep the shutdown's times in the state file
// and hand them to Config.Times, as upstream; failures are logged.
func (m *Manager) recordStart() time.Time {
	start := m.cfg.Clock.Now()
	m.record(state{StartTime: start})
	return start
}

func (m *Manager) recordEnd(start time.Time) {
	m.record(state{StartTime: start, EndTime: m.cfg.Clock.Now()})
}

func (m *Manager) record(s state) {
	if m.cfg.StatePath == "" {
		return
	}
	if err := storeState(m.cfg.StatePath, s); err != nil {
		klog.ErrorS(err, "Failed to store graceful shutdown state")
	}
	if m.cfg.Times != nil {
		m.cfg.Times(s.StartTime, s.EndTime)
	}
}

// recordLast hands the last shutdown's times, if any, to Config.Times.
func (m *Manager) recordLast() {
	if m.cfg.StatePath == "" || m.cfg.Times == nil {
		return
	}
	s, err := loadState(m.cfg.StatePath)
	if err != nil {
		klog.ErrorS(err, "Failed to load graceful shutdown state")
		return
	}
	m.cfg.Times(s.StartTime, s.EndTime)
}
