package openapiimport

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/proxy"
)

// maxValidateRounds bounds how many tools the configuration check may
// refuse one by one before the import gives up.
const maxValidateRounds = 16

var toolIndexRE = regexp.MustCompile(`^tools\[(\d+)\]`)

// validateTools loads the tools as toolgate's proxy section loads them
// (path templates, names, tools that would match the same calls): a tool
// the section refuses becomes a refused operation with the section's
// message, and the rest are checked again.
func validateTools(res *Result) error {
	for range maxValidateRounds {
		out, err := Render(res, "")
		if err != nil {
			return err
		}
		var cfg proxy.Config
		dec := yaml.NewDecoder(strings.NewReader(string(out)))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil {
			return fmt.Errorf("the tools written do not decode: %w", err)
		}
		cfg.Listen.Forward = "127.0.0.1:0" // no listener is opened
		err = cfg.Validate("")
		if err == nil {
			return nil
		}
		var fp interface{ FieldPath() string }
		if !errors.As(err, &fp) {
			return fmt.Errorf("the tools written do not load: %w", err)
		}
		m := toolIndexRE.FindStringSubmatch(fp.FieldPath())
		if m == nil {
			return fmt.Errorf("the tools written do not load: %w", err)
		}
		i, _ := strconv.Atoi(m[1])
		if i >= len(res.Tools) {
			return fmt.Errorf("the tools written do not load: %w", err)
		}
		t := res.Tools[i]
		res.Refused = append(res.Refused, Refusal{Operation: t.Operation, OperationID: t.OperationID, Reason: "toolgate does not load its tool: " + err.Error()})
		res.Tools = append(res.Tools[:i], res.Tools[i+1:]...)
	}
	return fmt.Errorf("the tools written do not load: more than %d tools refused by the configuration check", maxValidateRounds)
}
