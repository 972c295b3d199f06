package redisbackend

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"platform.io/services/storage/backend"
)

// TestLoadingIsUnavailable talks to a fake server that answers every command the way Redis does
// while it loads its data set at startup.
func TestLoadingIsUnavailable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if strings.HasPrefix(line, "*") { // one reply per command
						if _, err := c.Write([]byte("-LOADING Redis is loading the dataset in memory\r\n")); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	url := "redis://" + l.Addr().String() + "/0"
	// A Backend whose server starts loading (as after a restart) reports it unavailable.
	ro, err := clientOptions(Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	b := open(ro)
	defer b.Close()
	_, err = b.Create(context.Background(), pods, object("ns", "a", "v", "u"))
	if !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("Create against a loading server: %v, want ErrUnavailable", err)
	}
	if _, err := b.Read(context.Background(), pods, 0, 1); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("Read against a loading server: %v, want ErrUnavailable", err)
	}
	t0 := time.Now()
	_, err = New(context.Background(), Options{URL: url})
	t.Logf("New: %v", err)
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("New against a loading server: %v, want ErrUnavailable", err)
	}
	if d := time.Since(t0); d > 4*time.Second {
		t.Fatalf("New took %v", d)
	}
}
