package storage

import (
	"context"

	"google.golang.org/grpc"

	storagev1 "platform.io/proto/storage/v1"
)

// MaxMessageBytes bounds one gRPC message between the storage service and its clients; a large
// unpaged list is one message.
const MaxMessageBytes = 256 << 20

// CallOptions are the gRPC call options clients of the storage service should dial with.
func CallOptions() grpc.DialOption {
	return grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes))
}

// Client calls the storage service and returns its errors as *Error.
type Client struct {
	rpc storagev1.StorageClient
}

// NewClient wraps a connection to the storage service.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{rpc: storagev1.NewStorageClient(conn)}
}

// Create stores a new object and returns it with its resourceVersion.
func (c *Client) Create(ctx context.Context, req *storagev1.CreateRequest) (*storagev1.CreateResponse, error) {
	resp, err := c.rpc.Create(ctx, req)
	return resp, FromError(err)
}

// Get reads one object.
func (c *Client) Get(ctx context.Context, req *storagev1.GetRequest) (*storagev1.GetResponse, error) {
	resp, err := c.rpc.Get(ctx, req)
	return resp, FromError(err)
}

// List reads a collection, or one page of it.
func (c *Client) List(ctx context.Context, req *storagev1.ListRequest) (*storagev1.ListResponse, error) {
	resp, err := c.rpc.List(ctx, req)
	return resp, FromError(err)
}

// Update replaces an object if its preconditions hold.
func (c *Client) Update(ctx context.Context, req *storagev1.UpdateRequest) (*storagev1.UpdateResponse, error) {
	resp, err := c.rpc.Update(ctx, req)
	return resp, FromError(err)
}

// Delete removes an object if its preconditions hold.
func (c *Client) Delete(ctx context.Context, req *storagev1.DeleteRequest) (*storagev1.DeleteResponse, error) {
	resp, err := c.rpc.Delete(ctx, req)
	return resp, FromError(err)
}

// Revision reports the current and compacted revision of a type.
func (c *Client) Revision(ctx context.Context, req *storagev1.RevisionRequest) (*storagev1.RevisionResponse, error) {
	resp, err := c.rpc.Revision(ctx, req)
	return resp, FromError(err)
}

// Compact discards history up to a revision.
func (c *Client) Compact(ctx context.Context, req *storagev1.CompactRequest) (*storagev1.CompactResponse, error) {
	resp, err := c.rpc.Compact(ctx, req)
	return resp, FromError(err)
}

// WatchStream receives the events of one watch.
type WatchStream struct {
	stream grpc.ServerStreamingClient[storagev1.WatchResponse]
}

// Recv returns the next batch of events; the stream ends with an error (io.EOF when the server
// closed it cleanly, an *Error for a storage error such as EXPIRED).
func (w *WatchStream) Recv() ([]*storagev1.Event, error) {
	resp, err := w.stream.Recv()
	if err != nil {
		return nil, FromError(err)
	}
	return resp.GetEvents(), nil
}

// Watch starts a watch; cancel ctx to end it.
func (c *Client) Watch(ctx context.Context, req *storagev1.WatchRequest) (*WatchStream, error) {
	stream, err := c.rpc.Watch(ctx, req)
	if err != nil {
		return nil, FromError(err)
	}
	return &WatchStream{stream: stream}, nil
}
