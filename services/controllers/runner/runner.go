// Package runner runs a controller's keys through a client-go work queue, as upstream's
// controllers do: event handlers add keys (deduplicated while waiting), workers sync them one at a
// time per key, failures are retried with rate-limited backoff, and every sync and failure is
// counted per controller.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"platform.io/services/controllers/metrics"
)

// SyncFunc brings the world in line for one key. An error retries the key with backoff; an error
// made by RequeueAfter processes it again later without counting a failure.
type SyncFunc func(ctx context.Context, key string) error

// Options configure a Queue.
type Options struct {
	// Controller names the controller in metrics and logs; Name names the queue (upstream's
	// queue names, e.g. "serviceaccount_tokens_secret"); it defaults to Controller.
	Controller, Name string
	// Sync processes one key.
	Sync SyncFunc
	// MaxRetries drops a key after this many consecutive failures (0: retry without end).
	MaxRetries int
	// RateLimiter spaces the retries (default: client-go's controller rate limiter).
	RateLimiter workqueue.TypedRateLimiter[string]
	// Metrics receive the counts (nil: none).
	Metrics *metrics.Metrics
	// Log receives failures.
	Log *slog.Logger
}

// Queue is one controller's work queue and its workers.
type Queue struct {
	opts Options
	q    workqueue.TypedRateLimitingInterface[string]
}

// New creates the queue; keys added before Run wait for it.
func New(opts Options) *Queue {
	if opts.Name == "" {
		opts.Name = opts.Controller
	}
	if opts.RateLimiter == nil {
		opts.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[string]()
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics != nil {
		// The controller's series exist from the start: an error rate of zero, not no data.
		opts.Metrics.Syncs.WithLabelValues(opts.Controller)
		opts.Metrics.Errors.WithLabelValues(opts.Controller)
	}
	return &Queue{
		opts: opts,
		q: workqueue.NewTypedRateLimitingQueueWithConfig(opts.RateLimiter, workqueue.TypedRateLimitingQueueConfig[string]{
			Name:            opts.Name,
			MetricsProvider: opts.Metrics.QueueMetrics(),
		}),
	}
}

// Add queues key for processing.
func (q *Queue) Add(key string) { q.q.Add(key) }

// AddAfter queues key once d has passed.
func (q *Queue) AddAfter(key string, d time.Duration) { q.q.AddAfter(key, d) }

// Len is the number of keys waiting.
func (q *Queue) Len() int { return q.q.Len() }

// Run processes keys with the given number of workers until ctx ends, then stops taking keys and
// waits for the syncs in flight, so nothing is written after Run returns.
func (q *Queue) Run(ctx context.Context, workers int) {
	if workers < 1 {
		workers = 1
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	q.q.ShutDown()
	wg.Wait()
}

// ShutDown stops the queue without running it (a controller that never became leader).
func (q *Queue) ShutDown() { q.q.ShutDown() }

func (q *Queue) next(ctx context.Context) bool {
	key, quit := q.q.Get()
	if quit {
		return false
	}
	defer q.q.Done(key)
	if ctx.Err() != nil {
		// Stopping: leave the keys still queued to whoever leads next (it lists everything).
		return false
	}
	err := q.opts.Sync(ctx, key)
	if q.opts.Metrics != nil {
		q.opts.Metrics.Syncs.WithLabelValues(q.opts.Controller).Inc()
	}
	var requeue *requeueError
	switch {
	case err == nil:
		q.q.Forget(key)
	case errors.As(err, &requeue):
		q.q.Forget(key)
		q.q.AddAfter(key, requeue.after)
	case ctx.Err() != nil:
		// Stopping: the key is not lost, whoever leads next lists everything again.
	default:
		if q.opts.Metrics != nil {
			q.opts.Metrics.Errors.WithLabelValues(q.opts.Controller).Inc()
		}
		if q.opts.MaxRetries > 0 && q.q.NumRequeues(key) >= q.opts.MaxRetries {
			q.opts.Log.Warn("giving up on key after repeated failures", "key", key, "retries", q.opts.MaxRetries, "error", err)
			q.q.Forget(key)
			return true
		}
		q.opts.Log.Info("sync failed, retrying", "key", key, "error", err)
		q.q.AddRateLimited(key)
	}
	return true
}

// requeueError asks for a key to be processed again after a delay.
type requeueError struct{ after time.Duration }

func (e *requeueError) Error() string { return fmt.Sprintf("requeue after %s", e.after) }

// RequeueAfter is the error a SyncFunc returns to look at its key again after d without counting
// a failure (for example while a namespace's content is still going away).
func RequeueAfter(d time.Duration) error { return &requeueError{after: d} }
