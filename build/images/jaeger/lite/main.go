// Command jaeger-lite: the part of Jaeger v2's all-in-one (cmd/jaeger) that Platform's compose
// stack uses, and nothing else: the OTLP receiver (gRPC 4317, HTTP 4318), the batch processor,
// in-memory trace storage (jaeger_storage) and the query service with its HTTP API and UI
// (jaeger_query, 16686). build/images/build.sh compiles it inside Jaeger's module source (it uses
// Jaeger's internal packages) when JAEGER_BUILD=lite, the default; JAEGER_BUILD=full builds
// upstream's cmd/jaeger instead. Kafka, Zipkin, Jaeger's legacy receivers, tail sampling,
// attribute and filter processors, remote sampling, the Prometheus exporter, health check,
// pprof, zpages and the documentation subcommands are left out: compiling them is most of the
// cost of building Jaeger from source.
//
// Its configuration is built in (the same as upstream's all-in-one for what it keeps, listening
// on ${JAEGER_LISTEN_HOST}); `--config` replaces it as upstream's does.
package main

import (
	"github.com/spf13/cobra"

	"log"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/batchprocessor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"

	"github.com/jaegertracing/jaeger/cmd/jaeger/internal/exporters/storageexporter"
	"github.com/jaegertracing/jaeger/cmd/jaeger/internal/extension/jaegerquery"
	"github.com/jaegertracing/jaeger/cmd/jaeger/internal/extension/jaegerstorage"
	"github.com/jaegertracing/jaeger/internal/version"
)

const config = `
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: "${env:JAEGER_LISTEN_HOST:-localhost}:16686"
    grpc:
      endpoint: "${env:JAEGER_LISTEN_HOST:-localhost}:16685"
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: "${env:JAEGER_LISTEN_HOST:-localhost}:4317"
      http:
        endpoint: "${env:JAEGER_LISTEN_HOST:-localhost}:4318"
processors:
  batch:
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

func factories() (otelcol.Factories, error) {
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	var err error
	if f.Extensions, err = otelcol.MakeFactoryMap[extension.Factory](jaegerstorage.NewFactory(), jaegerquery.NewFactory()); err != nil {
		return f, err
	}
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	if f.Processors, err = otelcol.MakeFactoryMap[processor.Factory](batchprocessor.NewFactory()); err != nil {
		return f, err
	}
	f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](storageexporter.NewFactory())
	return f, err
}

func main() {
	cmd := otelcol.NewCommand(otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "jaeger", Description: "Jaeger v2 (Platform's trimmed all-in-one)", Version: version.Get().GitVersion},
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{envprovider.NewFactory(), fileprovider.NewFactory(), yamlprovider.NewFactory()},
			},
		},
	})
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if f := c.Flag("config"); f != nil && !f.Changed {
			if err := f.Value.Set("yaml:" + config); err != nil {
				return err
			}
		}
		return run(c, args)
	}
	if err := cmd.Execute(); err != nil {
		log.Fatal(err)
	}
}
