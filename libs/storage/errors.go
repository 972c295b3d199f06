// Package storage is the client side of the storage service: typed errors that survive the gRPC
// hop, and a client that returns them.
package storage

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	storagev1 "platform.io/proto/storage/v1"
)

// Error is a storage error with its type. The storage service returns it as a gRPC status with an
// ErrorDetail; the client turns such a status back into an *Error, so both ends test errors the
// same way (IsNotFound, IsConflict, ...).
type Error struct {
	Reason  storagev1.ErrorReason
	Message string
	// CurrentRevision of the type when the error happened, where known.
	CurrentRevision int64
	// RetryAfterSeconds suggests when to retry.
	RetryAfterSeconds int64
	// Field names the request field at fault (INVALID).
	Field string
	// Continue is, on the EXPIRED answer to a compacted continue token, the token that
	// continues the list at the most recent revision.
	Continue string
}

func (e *Error) Error() string { return e.Message }

// codeFor maps each reason to the gRPC code that says the same thing to generic gRPC tooling.
var codeFor = map[storagev1.ErrorReason]codes.Code{
	storagev1.ErrorReason_NOT_FOUND:                  codes.NotFound,
	storagev1.ErrorReason_ALREADY_EXISTS:             codes.AlreadyExists,
	storagev1.ErrorReason_CONFLICT:                   codes.Aborted,
	storagev1.ErrorReason_EXPIRED:                    codes.OutOfRange,
	storagev1.ErrorReason_TOO_LARGE_RESOURCE_VERSION: codes.DeadlineExceeded,
	storagev1.ErrorReason_INVALID:                    codes.InvalidArgument,
	storagev1.ErrorReason_UNAVAILABLE:                codes.Unavailable,
	storagev1.ErrorReason_INTERNAL:                   codes.Internal,
}

// GRPCStatus lets grpc-go send the error as a status carrying its ErrorDetail.
func (e *Error) GRPCStatus() *status.Status {
	code, ok := codeFor[e.Reason]
	if !ok {
		code = codes.Unknown
	}
	st := status.New(code, e.Message)
	withDetail, err := st.WithDetails(&storagev1.ErrorDetail{
		Reason:            e.Reason,
		CurrentRevision:   e.CurrentRevision,
		RetryAfterSeconds: e.RetryAfterSeconds,
		Field:             e.Field,
		Continue:          e.Continue,
	})
	if err != nil {
		return st
	}
	return withDetail
}

// FromError returns err as an *Error: unchanged if it already is one, decoded from its gRPC status
// otherwise. A status without ErrorDetail gets a reason from its code (a transport failure is
// UNAVAILABLE, a cancelled or expired context keeps its context error). nil stays nil.
func FromError(err error) error {
	if err == nil {
		return nil
	}
	var se *Error
	if errors.As(err, &se) {
		return se
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		if detail, ok := d.(*storagev1.ErrorDetail); ok {
			return &Error{
				Reason:            detail.GetReason(),
				Message:           st.Message(),
				CurrentRevision:   detail.GetCurrentRevision(),
				RetryAfterSeconds: detail.GetRetryAfterSeconds(),
				Field:             detail.GetField(),
				Continue:          detail.GetContinue(),
			}
		}
	}
	switch st.Code() {
	case codes.Canceled:
		return context.Canceled
	case codes.DeadlineExceeded:
		return context.DeadlineExceeded
	case codes.Unavailable:
		return &Error{Reason: storagev1.ErrorReason_UNAVAILABLE, Message: st.Message(), RetryAfterSeconds: 1}
	case codes.InvalidArgument:
		return &Error{Reason: storagev1.ErrorReason_INVALID, Message: st.Message()}
	}
	return &Error{Reason: storagev1.ErrorReason_INTERNAL, Message: fmt.Sprintf("%s: %s", st.Code(), st.Message())}
}

// ReasonOf returns the reason of a storage error, or ERROR_REASON_UNSPECIFIED for other errors.
func ReasonOf(err error) storagev1.ErrorReason {
	var se *Error
	if errors.As(err, &se) {
		return se.Reason
	}
	return storagev1.ErrorReason_ERROR_REASON_UNSPECIFIED
}

// IsNotFound reports whether err says the object does not exist.
func IsNotFound(err error) bool { return ReasonOf(err) == storagev1.ErrorReason_NOT_FOUND }

// IsAlreadyExists reports whether err says a create found the key taken.
func IsAlreadyExists(err error) bool { return ReasonOf(err) == storagev1.ErrorReason_ALREADY_EXISTS }

// IsConflict reports whether err says a precondition did not hold.
func IsConflict(err error) bool { return ReasonOf(err) == storagev1.ErrorReason_CONFLICT }

// IsExpired reports whether err says the requested history is gone (HTTP 410).
func IsExpired(err error) bool { return ReasonOf(err) == storagev1.ErrorReason_EXPIRED }

// IsTooLargeResourceVersion reports whether err says the requested revision never arrived (504).
func IsTooLargeResourceVersion(err error) bool {
	return ReasonOf(err) == storagev1.ErrorReason_TOO_LARGE_RESOURCE_VERSION
}

// IsInvalid reports whether err says the request was malformed (HTTP 400).
func IsInvalid(err error) bool { return ReasonOf(err) == storagev1.ErrorReason_INVALID }

// IsUnavailable reports whether err says the backend could not be reached (HTTP 503).
func IsUnavailable(err error) bool { return ReasonOf(err) == storagev1.ErrorReason_UNAVAILABLE }

// NewError builds an *Error with a formatted message.
func NewError(reason storagev1.ErrorReason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// NewInvalid builds an INVALID error naming the request field at fault.
func NewInvalid(field, format string, args ...any) *Error {
	return &Error{Reason: storagev1.ErrorReason_INVALID, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}
