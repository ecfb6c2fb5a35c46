package policies

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// nested is a schema whose property x nests kw (items or properties) d
// levels deep.
func nested(kw string, d int) string {
	var b strings.Builder
	for range d {
		if kw == "properties" {
			b.WriteString(`{"type":"object","properties":{"a":`)
		} else {
			b.WriteString(`{"type":"array","items":`)
		}
	}
	b.WriteString(`{"type":"string"}`)
	for range d {
		if kw == "properties" {
			b.WriteString(`}}`)
		} else {
			b.WriteString(`}`)
		}
	}
	return `{"type":"object","properties":{"x":` + b.String() + `}}`
}

// bombs are schemas an MCP server could list to make the sidecar spend
// minutes and gigabytes compiling (the review's was items nested 9,900
// deep in 247 KB).
func bombs() map[string]string {
	var en, wide, chain []string
	for i := range 20000 {
		en = append(en, fmt.Sprintf(`"v%d"`, i))
	}
	for i := range 3000 {
		wide = append(wide, fmt.Sprintf(`{"type":"object","properties":{"p%d":{"type":"string"},"q%d":{"type":"string"}}}`, i, i))
	}
	for i := range 5000 {
		chain = append(chain, fmt.Sprintf(`"d%d":{"$ref":"#/$defs/d%d"}`, i, i+1))
	}
	chain = append(chain, `"d5000":{"type":"string"}`)
	return map[string]string{
		"items nested 9,900 deep":      nested("items", 9900),
		"items nested 5,000 deep":      nested("items", 5000),
		"properties nested 2,000 deep": nested("properties", 2000),
		"a 20,000-value enum":          `{"type":"object","properties":{"x":{"enum":[` + strings.Join(en, ",") + `]}}}`,
		"anyOf of 3,000 branches":      `{"type":"object","properties":{"x":{"anyOf":[` + strings.Join(wide, ",") + `]}}}`,
		"a $ref chain of 5,000":        `{"type":"object","properties":{"x":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(chain, ",") + `}}`,
		"a pattern of a{1000} x 100":   `{"type":"object","properties":{"x":{"type":"string","pattern":"` + strings.Repeat("a{1000}", 100) + `"}}}`,
		"a 40,000-character pattern":   `{"type":"object","properties":{"x":{"type":"string","pattern":"` + strings.Repeat("(a|b)", 8000) + `"}}}`,
		"patternProperties names":      `{"type":"object","patternProperties":{"` + strings.Repeat("x{999}", 20) + `":{}}}`,
	}
}

// TestSchemaShapeRefused compiles each bomb: each is refused as too
// complex at once, before the library sees it, strict or not.
func TestSchemaShapeRefused(t *testing.T) {
	for name, doc := range bombs() {
		for _, strict := range []bool{false, true} {
			start := time.Now()
			_, err := CompileSchema([]byte(doc), SchemaOptions{Tool: "t", Strict: strict, UnknownFormats: FormatsIgnore})
			took := time.Since(start)
			if !errors.Is(err, ErrSchemaTooComplex) || !errors.Is(err, ErrInvalidSchema) {
				t.Errorf("%s (strict %v): %v, want too complex", name, strict, err)
			}
			// Unbounded, the first takes minutes; refused, milliseconds.
			// A loaded machine with the race detector gets 100 times that.
			if took > 2*time.Second {
				t.Errorf("%s: refused after %s", name, took)
			}
			if e := CheckSchemaShape("t", []byte(doc), DefaultSchemaLimits); !errors.Is(e, ErrSchemaTooComplex) {
				t.Errorf("%s: CheckSchemaShape %v, want too complex", name, e)
			}
		}
	}
	// A document a $ref reaches counts with the root.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "deep.json"), []byte(nested("items", 200)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := CompileSchema([]byte(`{"type":"object","properties":{"y":{"$ref":"deep.json"}}}`),
		SchemaOptions{Tool: "t", Dir: dir, Limits: FileSchemaLimits})
	if !errors.Is(err, ErrSchemaTooComplex) {
		t.Errorf("a $ref to a file nested 200 deep: %v, want too complex", err)
	}
	if err != nil && !strings.Contains(err.Error(), "deeper than 64") {
		t.Errorf("the error names no bound: %v", err)
	}
}

// TestSchemaWorstUnderBounds compiles the costliest shapes found that stay
// within DefaultSchemaLimits, strict (the costlier), and reports time and
// allocation: the figures docs/mcp.md states. Each must compile within 5
// seconds on a loaded machine (under a second alone), 30 with the race
// detector.
func TestSchemaWorstUnderBounds(t *testing.T) {
	var wide, chain, deepWide []string
	for i := range 1100 {
		wide = append(wide, fmt.Sprintf(`{"type":"object","properties":{"p%d":{"type":"string"},"q%d":{"type":"string"}}}`, i, i))
	}
	for i := range 3300 {
		chain = append(chain, fmt.Sprintf(`"d%d":{"$ref":"#/$defs/d%d"}`, i, i+1))
	}
	chain = append(chain, `"d3300":{"type":"string"}`)
	inner := strings.TrimSuffix(strings.TrimPrefix(nested("items", 58), `{"type":"object","properties":{"x":`), `}}`)
	for range 50 {
		deepWide = append(deepWide, inner)
	}
	tree := `{"type":"string"}`
	for range 7 {
		tree = `{"type":"object","properties":{"a":` + tree + `,"b":` + tree + `,"c":` + tree + `}}`
	}
	mix := `{"type":"object","properties":{"z":{"type":"string"}}}`
	for i := range 6 {
		mix = fmt.Sprintf(`{"allOf":[%s,{"type":"object","properties":{"q%d":{}}}],"anyOf":[%s,{"type":"object","properties":{"r%d":{}}}]}`, mix, i, mix, i)
	}
	for name, doc := range map[string]string{
		"properties tree, 3 names, 7 deep": `{"type":"object","properties":{"x":` + tree + `}}`,
		"allOf and anyOf doubling, 6 deep": `{"type":"object","properties":{"x":` + mix + `}}`,
		"items nested 60 deep":             nested("items", 60),
		"properties nested 30 deep":        nested("properties", 30),
		"anyOf of 1,100 objects":           `{"type":"object","properties":{"x":{"anyOf":[` + strings.Join(wide, ",") + `]}}}`,
		"a $ref chain of 3,300":            `{"type":"object","properties":{"x":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(chain, ",") + `}}`,
		"anyOf of 50 items chains 58 deep": `{"type":"object","properties":{"x":{"anyOf":[` + strings.Join(deepWide, ",") + `]}}}`,
		"5 patterns of x{999} x 9":         `{"type":"object","properties":{"a":{"pattern":"a{999}a{999}a{999}a{999}a{999}a{999}a{999}a{999}a{999}"},"b":{"pattern":"b{999}b{999}b{999}b{999}b{999}b{999}b{999}b{999}b{999}"},"c":{"pattern":"c{999}c{999}c{999}c{999}c{999}c{999}c{999}c{999}c{999}"},"d":{"pattern":"d{999}d{999}d{999}d{999}d{999}d{999}d{999}d{999}d{999}"},"e":{"pattern":"e{999}e{999}e{999}e{999}e{999}e{999}e{999}e{999}e{999}"}}}`,
	} {
		if err := CheckSchemaShape("t", []byte(doc), DefaultSchemaLimits); err != nil {
			t.Errorf("%s: %v, want within the bounds", name, err)
			continue
		}
		runtime.GC()
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		start := time.Now()
		_, err := CompileSchema([]byte(doc), SchemaOptions{Tool: "t", Strict: true, UnknownFormats: FormatsIgnore})
		took := time.Since(start)
		runtime.ReadMemStats(&b)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		// Alone, each takes under a second; a loaded machine gets 5
		// times that, and the race detector (about 10 times slower) 30 s.
		limit := 5 * time.Second
		if raceEnabled {
			limit = 30 * time.Second
		}
		if took > limit {
			t.Errorf("%s: compiling took %s, over %s", name, took, limit)
		}
		t.Logf("%-36s %7d bytes: %s, %.0f MiB allocated", name, len(doc), took.Round(time.Millisecond), float64(b.TotalAlloc-a.TotalAlloc)/(1<<20))
	}
}
