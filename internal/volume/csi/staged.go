package csi

// A staging directory's vol_data.json is written before NodeStageVolume,
// so that a crash during the call leaves something to unstage; it cannot
// also say the stage succeeded. So whether a volume is staged is known
// only for the stages this process saw succeed. After a restart, the
// next publish of a volume stages it again first (NodeStageVolume is
// idempotent), as upstream's reconstructed, uncertain device mounts are.

// volumeKey names one volume of one driver.
func volumeKey(driver, handle string) string { return driver + "^" + handle }

// isStaged tells whether this process staged the volume.
func (d *Drivers) isStaged(driver, handle string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.staged[volumeKey(driver, handle)]
}

// markStaged records whether the volume is staged.
func (d *Drivers) markStaged(driver, handle string, staged bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if staged {
		d.staged[volumeKey(driver, handle)] = true
	} else {
		delete(d.staged, volumeKey(driver, handle))
	}
}
