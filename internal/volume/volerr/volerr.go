// Package volerr tells the volume manager how to report a failed volume
// setup as upstream does: the step its event names ("MountVolume.
// WaitForAttach failed for volume ..."), or that the setup waits for a
// precondition (the volume reported in use, then attached by the
// controller), which upstream checks every 100 ms of its reconciler
// without back-off and without an event.
package volerr

import "errors"

// Error is a setup error with the step that failed.
type Error struct {
	// Step names the operation step in the event; ignored when Pending.
	Step string
	// Pending failures are retried soon, without an event.
	Pending bool
	Err     error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Step marks err as a failure of step.
func Step(step string, err error) error { return &Error{Step: step, Err: err} }

// Pending marks err as a precondition not met yet.
func Pending(err error) error { return &Error{Pending: true, Err: err} }

// Of returns the step err names, "" when it names none, and whether it
// is pending.
func Of(err error) (step string, pending bool) {
	var e *Error
	if !errors.As(err, &e) {
		return "", false
	}
	return e.Step, e.Pending
}
