package apiserver_test

import (
	"bytes"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"platform.io/services/gateway/gatewaytest"
)

// benchRules are five CEL validation rules on the benchmark's kind: on spec, on a scalar, on a
// list of strings, on a map list and on its items (a regular expression).
var benchRules = map[string]string{
	"spec":  `[{"rule":"!has(self.color) || self.color != 'green'","message":"no green widgets"}]`,
	"size":  `[{"rule":"self <= 10","message":"size must be at most 10"}]`,
	"tags":  `[{"rule":"self.all(t, size(t) <= 16)","message":"tags are short"}]`,
	"ports": `[{"rule":"self.all(p, p.port > 0 && p.port < 65536)","message":"ports must be valid"}]`,
	"item":  `[{"rule":"self.name.matches('^[a-z]+$')","message":"port names are lower case"}]`,
}

// ruleBenchCRD is the same kind in group group, with the five rules or without them.
func ruleBenchCRD(group string, rules bool) string {
	x := func(k string) string {
		if !rules {
			return ""
		}
		return `"x-kubernetes-validations":` + benchRules[k] + `,`
	}
	return fmt.Sprintf(`{"apiVersion":"apiextensions.platform.io/v1","kind":"CustomResourceDefinition",
	  "metadata":{"name":"widgets.%[1]s"},
	  "spec":{"group":%[1]q,"scope":"Namespaced","names":{"plural":"widgets","kind":"Widget"},
	    "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{
	      "spec":{"type":"object",%[2]s"required":["size"],"properties":{
	        "size":{"type":"integer",%[3]s"minimum":1},
	        "color":{"type":"string","enum":["red","blue","green"],"default":"red"},
	        "tags":{"type":"array",%[4]s"maxItems":16,"items":{"type":"string","maxLength":64}},
	        "ports":{"type":"array",%[5]s"maxItems":16,"x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],
	          "items":{"type":"object",%[6]s"required":["name"],"properties":{"name":{"type":"string","maxLength":15},"port":{"type":"integer"}}}}}}}}}}]}}`,
		group, x("spec"), x("size"), x("tags"), x("ports"), x("item"))
}

// BenchmarkCustomCreateRules is BenchmarkCustomCreate for the same kind without validation rules
// and with five (the target: at least 85% of the rate without): the two kinds differ
// only in their rules. Each run starts a gateway and storage of its own, so that neither kind
// runs on the other's objects; each reports the process's CPU time per create beside the
// wall-clock time.
func BenchmarkCustomCreateRules(b *testing.B) {
	for _, k := range []struct {
		name, group string
		rules       bool
	}{{"none", "plain.example.com", false}, {"five", "rules.example.com", true}} {
		b.Run("rules="+k.name, func(b *testing.B) {
			e := benchEnv(b)
			resp, err := e.Admin.Post(e.URL+crdsPath, "application/json", bytes.NewReader([]byte(ruleBenchCRD(k.group, k.rules))))
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				b.Fatalf("creating the definition: %d", resp.StatusCode)
			}
			collection := "/apis/" + k.group + "/v1/namespaces/default/widgets"
			waitServed(b, e, collection)
			body := func(name string) []byte {
				return []byte(fmt.Sprintf(`{"apiVersion":"%s/v1","kind":"Widget","metadata":{"name":%q,"labels":{"app":"bench"}},
				  "spec":{"size":3,"tags":["a","b"],"ports":[{"name":"http","port":80},{"name":"https","port":443}]}}`, k.group, name))
			}
			// The first create compiles the kind's rules: not part of what is measured.
			post(b, e.Admin, e.URL+collection, body("warm-up"))
			before := cpuTime(b)
			benchCreate(b, e, collection, body)
			b.ReportMetric(float64(cpuTime(b)-before)/float64(b.N), "cpu-ns/op")
		})
	}
}

// waitServed waits until a custom resource's collection answers.
func waitServed(b *testing.B, e *gatewaytest.Env, collection string) {
	for i := 0; ; i++ {
		resp, err := e.Admin.Get(e.URL + collection)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if i > 500 {
			b.Fatal("the definition was not established")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cpuTime is the CPU time (user and system) this process has used, in nanoseconds: the
// benchmark's client, gateway and storage all run in it, so its growth per create is what a
// create costs, whatever else the machine runs meanwhile (which wall-clock rates are not
// spared on a shared machine).
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
