package service

import (
	"strings"

	"github.com/spf13/pflag"

	"platform.io/libs/naming"
)

// AddNamingProfileFlag registers --naming-profile. The naming package has already chosen the
// profile from the same command line when the program started (identifiers are derived from it
// at package initialisation); the flag makes the choice parse, show in --help and fail on an
// unknown name.
func AddNamingProfileFlag(fs *pflag.FlagSet) {
	fs.Var(namingProfileValue{}, naming.ProfileFlag, "Names the system speaks: "+strings.Join(naming.Profiles, " or ")+
		" (platform: *.platform.io groups and labels, platform-system; kubernetes: upstream's *.k8s.io groups, kubernetes.io labels, kube-system, application/vnd.kubernetes.protobuf). Every service of one system must use the same profile. Also read from $"+naming.ProfileEnv+".")
}

// NamingProfileError is the error of an unknown profile named by $PLATFORM_NAMING_PROFILE or the
// flag, or nil.
func NamingProfileError() error { return naming.CheckProfile(naming.ProfileName()) }

type namingProfileValue struct{}

func (namingProfileValue) String() string     { return naming.ProfileName() }
func (namingProfileValue) Set(v string) error { return naming.CheckProfile(v) }
func (namingProfileValue) Type() string       { return "string" }
