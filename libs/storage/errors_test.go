package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	storagev1 "platform.io/proto/storage/v1"
)

// wire sends err the way grpc-go does: through its status, which is all that crosses the hop.
func wire(err error) error {
	st, _ := status.FromError(err)
	return status.ErrorProto(st.Proto())
}

func TestEveryReasonSurvivesTheWire(t *testing.T) {
	checks := map[storagev1.ErrorReason]func(error) bool{
		storagev1.ErrorReason_NOT_FOUND:                  IsNotFound,
		storagev1.ErrorReason_ALREADY_EXISTS:             IsAlreadyExists,
		storagev1.ErrorReason_CONFLICT:                   IsConflict,
		storagev1.ErrorReason_EXPIRED:                    IsExpired,
		storagev1.ErrorReason_TOO_LARGE_RESOURCE_VERSION: IsTooLargeResourceVersion,
		storagev1.ErrorReason_INVALID:                    IsInvalid,
		storagev1.ErrorReason_UNAVAILABLE:                IsUnavailable,
	}
	for reason, is := range checks {
		sent := &Error{Reason: reason, Message: "msg " + reason.String(), CurrentRevision: 42, RetryAfterSeconds: 3, Field: "f"}
		got := FromError(wire(sent))
		var se *Error
		if !errors.As(got, &se) || *se != *sent {
			t.Errorf("%v: sent %+v, received %+v", reason, sent, got)
		}
		if !is(got) {
			t.Errorf("%v: predicate false after the hop", reason)
		}
		for other, otherIs := range checks {
			if other != reason && otherIs(got) {
				t.Errorf("%v also reads as %v", reason, other)
			}
		}
		if code := status.Code(wire(sent)); code != codeFor[reason] {
			t.Errorf("%v travels as %v, want %v", reason, code, codeFor[reason])
		}
	}
}

func TestStatusesWithoutDetail(t *testing.T) {
	cases := []struct {
		in   error
		want func(error) bool
	}{
		{status.Error(codes.Unavailable, "connection refused"), IsUnavailable},
		{status.Error(codes.InvalidArgument, "bad"), IsInvalid},
		{status.Error(codes.Canceled, "x"), func(err error) bool { return errors.Is(err, context.Canceled) }},
		{status.Error(codes.DeadlineExceeded, "x"), func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
		{status.Error(codes.Internal, "boom"), func(err error) bool { return ReasonOf(err) == storagev1.ErrorReason_INTERNAL }},
		{io.EOF, func(err error) bool { return err == io.EOF }},
		{fmt.Errorf("wrapped: %w", context.Canceled), func(err error) bool { return errors.Is(err, context.Canceled) }},
	}
	for _, tc := range cases {
		if got := FromError(tc.in); !tc.want(got) {
			t.Errorf("FromError(%v) = %v", tc.in, got)
		}
	}
	if FromError(nil) != nil {
		t.Error("FromError(nil) is not nil")
	}
}
