//go:build !unix

package certs

import "errors"

// ownerOf fails where files have no numeric owner (Windows): --kubeconfig-owner-of is for the
// containers' bind mounts on Linux.
func ownerOf(string) (uid, gid int, err error) {
	return 0, 0, errors.New("files have no numeric owner on this system")
}
