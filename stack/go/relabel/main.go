// Command relabel applies a scrape's relabel_configs to one target and its
// metric_relabel_configs to the samples scraped from it, with Prometheus's own
// relabel package and the way a scrape attaches target labels to samples
// (honor_labels: false: a sample's own label that a target label overrides is
// kept as exported_<name>). The Helm chart's tests run the PodMonitor's
// relabelings through it, so what they check is what Prometheus does.
//
// Input (YAML or JSON, on stdin):
//
//	relabel_configs: [...]         # Prometheus syntax (snake_case)
//	metric_relabel_configs: [...]
//	target: {label: value, ...}    # discovered labels, __meta_* included
//	samples: [{label: value}, ...] # as exposed, __name__ included
//
// Output (JSON, on stdout): {"target": {...} | null, "samples": [{...} | null, ...]},
// null where a relabeling dropped the target or the sample.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	"go.yaml.in/yaml/v2"
)

type input struct {
	RelabelConfigs       []*relabel.Config   `yaml:"relabel_configs"`
	MetricRelabelConfigs []*relabel.Config   `yaml:"metric_relabel_configs"`
	Target               map[string]string   `yaml:"target"`
	Samples              []map[string]string `yaml:"samples"`
}

type output struct {
	Target  map[string]string   `json:"target"`
	Samples []map[string]string `json:"samples"`
}

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "relabel:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	raw, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	var given input
	if err := yaml.UnmarshalStrict(raw, &given); err != nil {
		return err
	}
	for _, configs := range [][]*relabel.Config{given.RelabelConfigs, given.MetricRelabelConfigs} {
		for _, c := range configs {
			if err := c.Validate(model.UTF8Validation); err != nil {
				return err
			}
		}
	}
	result := output{Samples: make([]map[string]string, 0, len(given.Samples))}
	target, kept := targetLabels(labels.FromMap(given.Target), given.RelabelConfigs)
	if kept {
		result.Target = target.Map()
		for _, sample := range given.Samples {
			result.Samples = append(result.Samples, sampleLabels(labels.FromMap(sample), target, given.MetricRelabelConfigs))
		}
	}
	return json.NewEncoder(out).Encode(result)
}

// targetLabels follows scrape.PopulateLabels: relabel, default instance to the
// address, then drop the labels that start with "__".
func targetLabels(discovered labels.Labels, configs []*relabel.Config) (labels.Labels, bool) {
	lb := labels.NewBuilder(discovered)
	if !relabel.ProcessBuilder(lb, configs...) {
		return labels.EmptyLabels(), false
	}
	if lb.Get(model.InstanceLabel) == "" {
		lb.Set(model.InstanceLabel, lb.Get(model.AddressLabel))
	}
	lb.Range(func(l labels.Label) {
		if strings.HasPrefix(l.Name, model.ReservedLabelPrefix) {
			lb.Del(l.Name)
		}
	})
	return lb.Labels(), true
}

// sampleLabels follows scrape.mutateSampleLabels with honor_labels false.
func sampleLabels(exposed, target labels.Labels, configs []*relabel.Config) map[string]string {
	lb := labels.NewBuilder(exposed)
	var conflicting []labels.Label
	target.Range(func(l labels.Label) {
		if value := exposed.Get(l.Name); value != "" {
			conflicting = append(conflicting, labels.Label{Name: l.Name, Value: value})
		}
		lb.Set(l.Name, l.Value)
	})
	slices.SortStableFunc(conflicting, func(a, b labels.Label) int { return len(a.Name) - len(b.Name) })
	for _, l := range conflicting {
		name := l.Name
		for {
			name = model.ExportedLabelPrefix + name
			if lb.Get(name) == "" {
				lb.Set(name, l.Value)
				break
			}
		}
	}
	if !relabel.ProcessBuilder(lb, configs...) {
		return nil
	}
	return lb.Labels().Map()
}
