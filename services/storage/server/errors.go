package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
)

// toStatus turns any error of a handler into the error grpc-go sends: a typed *storage.Error
// (a status with ErrorDetail) for everything the front door must map to an HTTP status.
func toStatus(ctx context.Context, log *slog.Logger, err error, rt *storagev1.ResourceType, name string) error {
	if err == nil {
		return nil
	}
	var se *storage.Error
	var ce *backend.ConflictError
	what := backend.TypeName(rt)
	switch {
	case errors.As(err, &se):
		return se
	case errors.Is(err, backend.ErrNotFound):
		return storage.NewError(storagev1.ErrorReason_NOT_FOUND, "%s %q not found", what, name)
	case errors.Is(err, backend.ErrAlreadyExists):
		return storage.NewError(storagev1.ErrorReason_ALREADY_EXISTS, "%s %q already exists", what, name)
	case errors.As(err, &ce):
		msg := fmt.Sprintf("Operation cannot be fulfilled on %s %q: the object has been modified; please apply your changes to the latest version and try again", what, name)
		if ce.Field == "uid" {
			msg = fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", ce.Expected, ce.Actual)
		}
		return &storage.Error{Reason: storagev1.ErrorReason_CONFLICT, Message: msg, CurrentRevision: ce.CurrentRevision, Field: ce.Field}
	case errors.Is(err, backend.ErrCompacted):
		return storage.NewError(storagev1.ErrorReason_EXPIRED, "the requested history of %s has been compacted", what)
	case errors.Is(err, backend.ErrUnavailable):
		return &storage.Error{Reason: storagev1.ErrorReason_UNAVAILABLE, Message: err.Error(), RetryAfterSeconds: 1}
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	log.ErrorContext(ctx, "storage request failed", "type", what, "name", name, "err", err)
	return storage.NewError(storagev1.ErrorReason_INTERNAL, "internal storage error")
}
