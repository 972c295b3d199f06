// Package server is the storage service: the gRPC API of proto/storage/v1 over a backend (writes)
// and the cache (reads and watches), with its configuration, metrics, health and lifecycle.
package server

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"platform.io/libs/storage"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
	"platform.io/services/storage/cache"
)

// Service implements storagev1.StorageServer.
type Service struct {
	storagev1.UnimplementedStorageServer
	be    backend.Backend
	cache *cache.Cache
	log   *slog.Logger
	// stopping ends every watch when the service shuts down, so that a graceful stop does not
	// wait for streams that never end on their own.
	stopping context.Context
}

func annotate(ctx context.Context, rt *storagev1.ResourceType) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("platform.storage.type", backend.TypeName(rt)))
	}
}

// Create implements storagev1.StorageServer.
func (s *Service) Create(ctx context.Context, req *storagev1.CreateRequest) (*storagev1.CreateResponse, error) {
	obj := req.GetObject()
	if err := validateObject(req.GetType(), obj); err != nil {
		return nil, err
	}
	annotate(ctx, req.GetType())
	ev, err := s.be.Create(ctx, req.GetType(), obj)
	if err != nil {
		return nil, toStatus(ctx, s.log, err, req.GetType(), obj.GetName())
	}
	s.cache.Ensure(req.GetType())
	return &storagev1.CreateResponse{Object: cache.ReadView(ev.Object)}, nil
}

// Update implements storagev1.StorageServer.
func (s *Service) Update(ctx context.Context, req *storagev1.UpdateRequest) (*storagev1.UpdateResponse, error) {
	obj := req.GetObject()
	if err := validateObject(req.GetType(), obj); err != nil {
		return nil, err
	}
	if err := validatePreconditions(req.GetPreconditions()); err != nil {
		return nil, err
	}
	annotate(ctx, req.GetType())
	ev, err := s.be.Update(ctx, req.GetType(), obj, req.GetPreconditions())
	if err != nil {
		return nil, toStatus(ctx, s.log, err, req.GetType(), obj.GetName())
	}
	s.cache.Ensure(req.GetType())
	return &storagev1.UpdateResponse{Object: cache.ReadView(ev.Object), Previous: cache.ReadView(ev.Prev)}, nil
}

// Delete implements storagev1.StorageServer.
func (s *Service) Delete(ctx context.Context, req *storagev1.DeleteRequest) (*storagev1.DeleteResponse, error) {
	if err := validateKey(req.GetType(), req.GetNamespace(), req.GetName()); err != nil {
		return nil, err
	}
	if err := validatePreconditions(req.GetPreconditions()); err != nil {
		return nil, err
	}
	annotate(ctx, req.GetType())
	ev, err := s.be.Delete(ctx, req.GetType(), req.GetNamespace(), req.GetName(), req.GetPreconditions())
	if err != nil {
		return nil, toStatus(ctx, s.log, err, req.GetType(), req.GetName())
	}
	s.cache.Ensure(req.GetType())
	return &storagev1.DeleteResponse{Previous: cache.ReadView(ev.Prev), ResourceVersion: ev.Revision}, nil
}

// Get implements storagev1.StorageServer.
func (s *Service) Get(ctx context.Context, req *storagev1.GetRequest) (*storagev1.GetResponse, error) {
	if err := validateKey(req.GetType(), req.GetNamespace(), req.GetName()); err != nil {
		return nil, err
	}
	annotate(ctx, req.GetType())
	obj, err := s.cache.Get(ctx, req.GetType(), req.GetNamespace(), req.GetName(), req.GetResourceVersion())
	if err != nil {
		return nil, toStatus(ctx, s.log, err, req.GetType(), req.GetName())
	}
	return &storagev1.GetResponse{Object: obj}, nil
}

// List implements storagev1.StorageServer.
func (s *Service) List(ctx context.Context, req *storagev1.ListRequest) (*storagev1.ListResponse, error) {
	if err := validateType(req.GetType()); err != nil {
		return nil, err
	}
	if err := validateNamespace("namespace", req.GetNamespace()); err != nil {
		return nil, err
	}
	annotate(ctx, req.GetType())
	// The items go out already encoded (see cache.ListWire): the response is only marshaled.
	resp, err := s.cache.ListWire(ctx, req)
	if err != nil {
		return nil, toStatus(ctx, s.log, err, req.GetType(), "")
	}
	return resp, nil
}

// Watch implements storagev1.StorageServer.
func (s *Service) Watch(req *storagev1.WatchRequest, stream grpc.ServerStreamingServer[storagev1.WatchResponse]) error {
	if err := validateType(req.GetType()); err != nil {
		return err
	}
	if err := validateNamespace("namespace", req.GetNamespace()); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	defer context.AfterFunc(s.stopping, cancel)()
	annotate(ctx, req.GetType())
	w, err := s.cache.Watch(ctx, req)
	if err != nil {
		return toStatus(ctx, s.log, err, req.GetType(), "")
	}
	defer w.Close()
	for {
		evs, err := w.Next(ctx)
		switch {
		case err == nil:
		case cache.IsReset(err):
			return nil // the client resumes from its last revision
		case s.stopping.Err() != nil:
			return status.Error(codes.Unavailable, "storage service is shutting down; resume the watch from the last revision")
		default:
			return toStatus(ctx, s.log, err, req.GetType(), "")
		}
		if err := stream.SendMsg(evs); err != nil { // a *cache.Batch: see wireCodec
			return err
		}
	}
}

// Revision implements storagev1.StorageServer.
func (s *Service) Revision(ctx context.Context, req *storagev1.RevisionRequest) (*storagev1.RevisionResponse, error) {
	if err := validateType(req.GetType()); err != nil {
		return nil, err
	}
	cur, compacted, err := s.cache.Revision(ctx, req.GetType())
	if err != nil {
		return nil, toStatus(ctx, s.log, err, req.GetType(), "")
	}
	return &storagev1.RevisionResponse{Current: cur, Compacted: compacted}, nil
}

// Compact implements storagev1.StorageServer.
func (s *Service) Compact(ctx context.Context, req *storagev1.CompactRequest) (*storagev1.CompactResponse, error) {
	if err := validateType(req.GetType()); err != nil {
		return nil, err
	}
	if req.GetRevision() < 0 {
		return nil, storage.NewInvalid("revision", "must not be negative")
	}
	eff, err := s.cache.Compact(ctx, req.GetType(), req.GetRevision())
	if err != nil {
		return nil, toStatus(ctx, s.log, err, req.GetType(), "")
	}
	return &storagev1.CompactResponse{Compacted: eff}, nil
}
