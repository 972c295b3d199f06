package service

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"platform.io/libs/naming"
)

// The flag accepts the profile the process started with and refuses any other name, so a
// command line cannot claim one profile while the identifiers were derived from another.
func TestNamingProfileFlag(t *testing.T) {
	parse := func(args ...string) error {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.SetOutput(&strings.Builder{})
		AddNamingProfileFlag(fs)
		return fs.Parse(args)
	}
	if err := parse("--naming-profile=" + naming.ProfileName()); err != nil {
		t.Errorf("the chosen profile: %v", err)
	}
	if err := parse(); err != nil || NamingProfileError() != nil {
		t.Errorf("no flag: %v, %v", err, NamingProfileError())
	}
	for _, other := range []string{"bogus", map[bool]string{true: naming.KubernetesProfile, false: naming.PlatformProfile}[naming.ProfileName() == naming.PlatformProfile]} {
		if err := parse("--naming-profile=" + other); err == nil {
			t.Errorf("--naming-profile=%s accepted in the %s profile", other, naming.ProfileName())
		}
	}
}
