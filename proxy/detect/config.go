package detect

import (
	"fmt"
	"sort"
	"strings"
)

// Defaults and ranges of Config's bounds.
const (
	// DefaultMaxBytes is how many bytes of strings one Scan reads: 1 MiB.
	DefaultMaxBytes = 1 << 20
	// DefaultMaxFindings is how many findings one Scan returns: 100.
	DefaultMaxFindings = 100
	// DefaultMaxDepth is how deep into nested arrays and objects a Scan
	// goes: 64 levels.
	DefaultMaxDepth = 64
	// DefaultInstructionThreshold is the score a paragraph needs to be an
	// instruction finding: 4 (one strong cue, or two medium ones).
	DefaultInstructionThreshold = 4

	maxMaxBytes    = 64 << 20
	maxMaxFindings = 10000
	maxMaxDepth    = 1000
	maxThreshold   = 100
)

// Groups of detectors, as Config.Detect names them.
const (
	GroupSecrets      = "secrets"
	GroupPII          = "pii"
	GroupInstructions = "instructions"
)

// Config selects detectors and bounds a scan. Its zero value, validated,
// runs every detector with the default bounds. It is the `detect:` part of
// a tool's `answer:` section; Validate applies the defaults, and New
// compiles it once into a Detector.
type Config struct {
	// Detect names the detectors to run: a group ("secrets", "pii",
	// "instructions") or one kind ("secret.github_token", "pii.email",
	// "instruction"). Default: all three groups.
	Detect []string `yaml:"detect"`
	// MaxBytes bounds how many bytes of string content one scan reads;
	// what lies beyond is not scanned and the report says so
	// (Incomplete: "max_bytes"). Default DefaultMaxBytes (1 MiB); at most
	// 64 MiB.
	MaxBytes int `yaml:"max_bytes"`
	// MaxFindings bounds how many findings one scan returns; the scan
	// stops at the bound (Incomplete: "max_findings"). Default
	// DefaultMaxFindings (100); at most 10000.
	MaxFindings int `yaml:"max_findings"`
	// MaxDepth bounds how deep into nested arrays and objects a scan
	// goes; deeper values are not scanned (Incomplete: "max_depth").
	// Default DefaultMaxDepth (64); at most 1000.
	MaxDepth int `yaml:"max_depth"`
	// InstructionThreshold is the score at which a paragraph counts as
	// instruction-like text (see the package doc for the cues and their
	// weights). Default DefaultInstructionThreshold (4); 1 to 100.
	InstructionThreshold int `yaml:"instruction_threshold"`
}

// Validate applies the defaults and checks every field; an error wraps
// ErrConfig and names the field.
func (c *Config) Validate() error {
	if len(c.Detect) == 0 {
		c.Detect = []string{GroupSecrets, GroupPII, GroupInstructions}
	}
	for i, name := range c.Detect {
		if _, err := kindsOf(name); err != nil {
			return fmt.Errorf("%w: detect[%d]: %v", ErrConfig, i, err)
		}
	}
	if err := bound(&c.MaxBytes, "max_bytes", DefaultMaxBytes, maxMaxBytes); err != nil {
		return err
	}
	if err := bound(&c.MaxFindings, "max_findings", DefaultMaxFindings, maxMaxFindings); err != nil {
		return err
	}
	if err := bound(&c.MaxDepth, "max_depth", DefaultMaxDepth, maxMaxDepth); err != nil {
		return err
	}
	return bound(&c.InstructionThreshold, "instruction_threshold", DefaultInstructionThreshold, maxThreshold)
}

// bound applies def to a zero *v and checks 1 <= *v <= max.
func bound(v *int, field string, def, max int) error {
	if *v == 0 {
		*v = def
	}
	if *v < 1 || *v > max {
		return fmt.Errorf("%w: %s: %d is out of range (1 to %d)", ErrConfig, field, *v, max)
	}
	return nil
}

// kindsOf resolves a group or kind name to its kinds.
func kindsOf(name string) ([]Kind, error) {
	var out []Kind
	switch name {
	case GroupSecrets:
		for _, d := range secretDetectors {
			out = append(out, d.kind)
		}
		return append(out, KindSecretGeneric), nil
	case GroupPII:
		return []Kind{KindEmail, KindPhone}, nil
	case GroupInstructions:
		return []Kind{KindInstruction}, nil
	}
	for _, k := range AllKinds() {
		if string(k) == name {
			return []Kind{k}, nil
		}
	}
	return nil, fmt.Errorf("unknown detector %q; use a group (secrets, pii, instructions) or a kind (%s)", name, kindList())
}

func kindList() string {
	var names []string
	for _, k := range AllKinds() {
		names = append(names, string(k))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
