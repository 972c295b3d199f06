// Package tokenfile is the static token method of the authentication service (method
// "token-file", --token-auth-file): a CSV file read once at start, each record
// token,user,uid[,"group1,group2"], as upstream reads it. Changing the file needs a restart, as
// upstream.
package tokenfile

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"platform.io/services/authn/authenticator"
)

// MethodName is the method's name in responses, logs and metrics.
const MethodName = "token-file"

// Config is the method's configuration.
type Config struct {
	// File is the CSV file (--token-auth-file).
	File string
	// Logger receives warnings about skipped and duplicate records (by line, never the token);
	// nil is slog.Default().
	Logger *slog.Logger
}

// Authenticator is the static token method. It is safe for concurrent use.
type Authenticator struct {
	tokens map[string]*authenticator.User
}

var _ authenticator.Method = (*Authenticator)(nil)

// New reads cfg.File; a file that cannot be read or parsed is an error naming the file and line.
func New(cfg Config) (*Authenticator, error) {
	if cfg.File == "" {
		return nil, errors.New("--token-auth-file is empty")
	}
	f, err := os.Open(cfg.File)
	if err != nil {
		return nil, fmt.Errorf("--token-auth-file: %w", err)
	}
	defer f.Close()
	a, err := Parse(f, cfg.File, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("--token-auth-file: %w", err)
	}
	return a, nil
}

// Parse reads token records from r (source names it in messages), as upstream does: CSV with at
// least three fields per record (token, user name, uid) and an optional fourth, the
// comma-separated groups; further fields are ignored. Blank lines are skipped; a record with an
// empty token is skipped with a warning; a token listed twice keeps its last record, with a
// warning. Unlike upstream, empty group names ("a,,b" or an empty fourth field) are dropped rather
// than kept as a group named "".
func Parse(r io.Reader, source string, log *slog.Logger) (*Authenticator, error) {
	if log == nil {
		log = slog.Default()
	}
	tokens := map[string]*authenticator.User{}
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	for {
		record, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			// csv.ParseError names the line and column.
			return nil, fmt.Errorf("token file '%s': %w", source, err)
		}
		line, _ := cr.FieldPos(0)
		if len(record) < 3 {
			return nil, fmt.Errorf("token file '%s' must have at least 3 columns (token, user name, user uid), found %d on line %d", source, len(record), line)
		}
		if record[0] == "" {
			log.Warn("empty token in the token file, record skipped", "file", source, "line", line)
			continue
		}
		if _, dup := tokens[record[0]]; dup {
			log.Warn("duplicate token in the token file, the later record wins", "file", source, "line", line)
		}
		u := &authenticator.User{Name: record[1], UID: record[2]}
		if len(record) >= 4 {
			for _, g := range strings.Split(record[3], ",") {
				if g != "" {
					u.Groups = append(u.Groups, g)
				}
			}
		}
		tokens[record[0]] = u
	}
	return &Authenticator{tokens: tokens}, nil
}

// Name is MethodName.
func (a *Authenticator) Name() string { return MethodName }

// Len is the number of tokens the file holds.
func (a *Authenticator) Len() int { return len(a.tokens) }

// Authenticate accepts a token of the file; any other token is ErrNotMine (the file cannot tell a
// mistyped token from another method's).
func (a *Authenticator) Authenticate(_ context.Context, req *authenticator.Request) (*authenticator.Response, error) {
	if req.Token == "" {
		return nil, authenticator.ErrNotMine
	}
	u, ok := a.tokens[req.Token]
	if !ok {
		return nil, authenticator.ErrNotMine
	}
	// A copy: callers may add groups (system:authenticated) to what they get.
	return &authenticator.Response{User: &authenticator.User{Name: u.Name, UID: u.UID, Groups: slices.Clone(u.Groups)}}, nil
}
