package main

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"
)

// --controllers defaults to the all-in-one's selection (upstream's default set, with the
// bootstrap token cleaner and signer), and a value given replaces it, as upstream's flag does.
func TestControllersFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    []string
		on, off []string
	}{
		{nil, []string{"*", "tokencleaner", "bootstrapsigner"}, []string{"namespace", "tokencleaner", "bootstrapsigner"}, nil},
		{[]string{"--controllers=namespace"}, []string{"namespace"}, []string{"namespace"}, []string{"serviceaccount", "tokencleaner"}},
		{[]string{"--controllers=*,-namespace"}, []string{"*", "-namespace"}, []string{"serviceaccount"}, []string{"namespace", "bootstrapsigner"}},
		{[]string{"--controllers=-csrcleaner"}, []string{"-csrcleaner"}, nil, []string{"namespace", "serviceaccount", "csrcleaner"}},
	} {
		c := defaultConfig()
		fs := pflag.NewFlagSet("allinone", pflag.ContinueOnError)
		c.registerFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c.controllers.Controllers, tc.want) {
			t.Errorf("%v: --controllers is %v, want %v", tc.args, c.controllers.Controllers, tc.want)
		}
		for _, name := range tc.on {
			if !c.controllers.Enabled(name) {
				t.Errorf("%v: %s is off", tc.args, name)
			}
		}
		for _, name := range tc.off {
			if c.controllers.Enabled(name) {
				t.Errorf("%v: %s is on", tc.args, name)
			}
		}
	}
}
