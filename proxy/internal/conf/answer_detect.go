package conf

import (
	"slices"
	"strings"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/detect"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// The answer detect step: a plain HTTP tool's 2xx answers scanned by the
// built-in detectors (proxy/detect: secrets, e-mail and phone numbers,
// instruction-like text) before the caller sees them, and withheld or
// redacted as the tool's answer section says.

// AnswerDetectConfig is the detectors' part of a tool's answer section.
type AnswerDetectConfig struct {
	// Detect names the detectors to run on the tool's answers: groups
	// (secrets, pii, instructions) or single kinds (secret.github_token,
	// pii.email, instruction). Default: none, and no detector runs.
	Detect []string `yaml:"detect"`
	// OnFinding is what an answer with a finding gets: withhold (the
	// caller gets a refusal that names the kinds found and never holds the
	// answer) or redact (each finding is replaced by
	// "[redacted:<kind>]" and the answer goes on). Default withhold.
	OnFinding string `yaml:"on_finding"`
	// Mode is enforce or dry_run: in dry run the answer always goes on
	// unchanged, and the event records what enforcing would have done
	// (answer: would_withhold or would_redact). Default enforce.
	Mode string `yaml:"mode"`
	// Unreadable is what an answer the detectors cannot read gets (not
	// JSON or text, an encoded body, larger than max_bytes): refuse, or
	// pass (it goes on unchecked, and the event says answer: uninspected).
	// Default refuse: nothing passes unscanned unless the tool says so.
	Unreadable string `yaml:"unreadable"`
	// InstructionThreshold is the score at which text counts as
	// instruction-like (docs/answers.md lists the cues). Default 4.
	InstructionThreshold int `yaml:"instruction_threshold"`

	det *detect.Detector // compiled by compileAnswerDetect
}

// The values of answer.on_finding and answer.unreadable.
const (
	onFindingWithhold = "withhold"
	onFindingRedact   = "redact"
	unreadableRefuse  = "refuse"
	unreadablePass    = "pass"
)

// compileAnswerDetect validates the detectors' part of a tool's answer
// section (p is the tool's field path) and builds its detector.
func (c *Config) compileAnswerDetect(t *Tool, p string) error {
	a := &t.Cfg.Answer.AnswerDetectConfig
	if len(a.Detect) == 0 {
		for field, set := range map[string]bool{"on_finding": a.OnFinding != "", "mode": a.Mode != "", "unreadable": a.Unreadable != "", "instruction_threshold": a.InstructionThreshold != 0} {
			if set {
				return fieldErr(p+".answer."+field, "set without answer.detect: no detector runs")
			}
		}
		return nil
	}
	if err := oneOf(&a.OnFinding, p+".answer.on_finding", onFindingWithhold, onFindingRedact); err != nil {
		return err
	}
	if err := oneOf(&a.Mode, p+".answer.mode", policies.ModeEnforce, policies.ModeDryRun); err != nil {
		return err
	}
	if err := oneOf(&a.Unreadable, p+".answer.unreadable", unreadableRefuse, unreadablePass); err != nil {
		return err
	}
	if t.Cfg.Answer.MaxBytes < 0 {
		return fieldErr(p+".answer.max_bytes", "must be positive")
	}
	if t.Cfg.Answer.MaxBytes == 0 {
		t.Cfg.Answer.MaxBytes = DefaultAnswerBytes
	}
	det, err := detect.New(detect.Config{Detect: a.Detect, MaxBytes: int(t.Cfg.Answer.MaxBytes), InstructionThreshold: a.InstructionThreshold})
	if err != nil {
		return fieldErr(p+".answer", "%s", strings.TrimPrefix(err.Error(), detect.ErrConfig.Error()+": "))
	}
	a.det = det
	return nil
}

// oneOf applies the default (the first of allowed) to an empty *v and
// checks that it is one of allowed.
func oneOf(v *string, field string, allowed ...string) error {
	if *v == "" {
		*v = allowed[0]
	}
	if !slices.Contains(allowed, *v) {
		return fieldErr(field, "unknown value %q; expected %s", mcp.BoundedText(*v), strings.Join(allowed, " or "))
	}
	return nil
}

// detectRule is a compiled detectors section: the detectors, and what
// an answer with a finding gets. A plain HTTP tool's detect step and an
// MCP route's result checks (mcp_answer.go) share it.
type DetectRule struct {
	Det    *detect.Detector
	Redact bool
	DryRun bool
	Pass   bool // unreadable answers pass unchecked
}

// newDetectRule is the rule of a validated detectors section; nil when
// no detector runs.
func NewDetectRule(a *AnswerDetectConfig) *DetectRule {
	if a.det == nil {
		return nil
	}
	return &DetectRule{Det: a.det, Redact: a.OnFinding == onFindingRedact, DryRun: a.Mode == policies.ModeDryRun, Pass: a.Unreadable == unreadablePass}
}
