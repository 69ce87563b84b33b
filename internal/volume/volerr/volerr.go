// Package volerr tells the volume manager how to report a failed volume
// setup as upstream does: the step its event names ("MountVolume.
// WaitForAttach failed for volume ..."), or that upstream records no
// event at all because a precondition is still pending (the volume not
// yet reported in use, or not yet attached by the controller).
package volerr

import "errors"

// Error is a setup error with the step that failed.
type Error struct {
	// Step names the operation step in the event; ignored when Quiet.
	Step string
	// Quiet failures are retried without an event.
	Quiet bool
	Err   error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Step marks err as a failure of step.
func Step(step string, err error) error { return &Error{Step: step, Err: err} }

// Quiet marks err as a pending precondition: retried, not reported.
func Quiet(err error) error { return &Error{Quiet: true, Err: err} }

// Of returns the step err names, "" when it names none, and whether it
// is quiet.
func Of(err error) (step string, quiet bool) {
	var e *Error
	if !errors.As(err, &e) {
		return "", false
	}
	return e.Step, e.Quiet
}
