package policies

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

func measure(name, doc string) {
	for _, strict := range []bool{false, true} {
		runtime.GC()
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		st := time.Now()
		_, err := CompileSchema([]byte(doc), SchemaOptions{Strict: strict, UnknownFormats: FormatsIgnore})
		el := time.Since(st)
		runtime.ReadMemStats(&b)
		es := fmt.Sprint(err)
		if len(es) > 80 {
			es = es[:80]
		}
		fmt.Printf("%s strict=%v bytes=%d took=%s alloc=%.1fMiB err=%v\n", name, strict, len(doc), el, float64(b.TotalAlloc-a.TotalAlloc)/(1<<20), es)
	}
}

func TestZZMeasure2(t *testing.T) {
	// anyOf of N branches each with M properties
	for _, n := range []int{100, 1000, 3000} {
		var br []string
		for i := range n {
			var ps []string
			for j := range 3 {
				ps = append(ps, fmt.Sprintf(`"p%d_%d":{"type":"string"}`, i, j))
			}
			br = append(br, `{"type":"object","properties":{`+strings.Join(ps, ",")+`}}`)
		}
		measure(fmt.Sprintf("anyOf-props n=%d", n), `{"type":"object","properties":{"x":{"anyOf":[`+strings.Join(br, ",")+`]}}}`)
	}
	// nested allOf each level with anyOf of 2 branches with props (exponential?)
	for _, d := range []int{10, 20, 30} {
		s := `{"type":"object","properties":{"z":{"type":"string"}}}`
		for i := range d {
			s = fmt.Sprintf(`{"allOf":[%s,{"type":"object","properties":{"q%d":{"type":"string"}}}],"anyOf":[%s,{"type":"object","properties":{"r%d":{"type":"string"}}}]}`, s, i, s, i)
			if len(s) > 1<<20 {
				break
			}
		}
		if len(s) < 1<<20 {
			measure(fmt.Sprintf("allOf-anyOf d=%d", d), `{"type":"object","properties":{"x":`+s+`}}`)
		}
	}
	// $ref chain
	for _, n := range []int{1000, 5000} {
		var defs []string
		for i := range n {
			defs = append(defs, fmt.Sprintf(`"d%d":{"$ref":"#/$defs/d%d"}`, i, i+1))
		}
		defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object","properties":{"a":{"type":"string"}}}`, n))
		measure(fmt.Sprintf("ref-chain n=%d", n), `{"type":"object","properties":{"x":{"$ref":"#/$defs/d0"}},"$defs":{`+strings.Join(defs, ",")+`}}`)
	}
	// refs fan: each def refs two next (DAG, exponential paths)
	for _, n := range []int{20, 40} {
		var defs []string
		for i := range n {
			defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object","properties":{"a":{"$ref":"#/$defs/d%d"},"b":{"$ref":"#/$defs/d%d"}}}`, i, i+1, i+1))
		}
		defs = append(defs, fmt.Sprintf(`"d%d":{"type":"string"}`, n))
		measure(fmt.Sprintf("ref-dag n=%d", n), `{"type":"object","properties":{"x":{"$ref":"#/$defs/d0"}},"$defs":{`+strings.Join(defs, ",")+`}}`)
	}
	// ref DAG via allOf (in place)
	for _, n := range []int{20, 40} {
		var defs []string
		for i := range n {
			defs = append(defs, fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}],"properties":{"p%d":{}}}`, i, i+1, i+1, i))
		}
		defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object","properties":{"z":{}}}`, n))
		measure(fmt.Sprintf("ref-allof-dag n=%d", n), `{"type":"object","properties":{"x":{"$ref":"#/$defs/d0"}},"$defs":{`+strings.Join(defs, ",")+`}}`)
	}
	// huge enum
	var en []string
	for i := range 50000 {
		en = append(en, fmt.Sprintf(`"v%d"`, i))
	}
	measure("enum 50000", `{"type":"object","properties":{"x":{"enum":[`+strings.Join(en, ",")+`]}}}`)
	// huge pattern
	measure("pattern 200KB", `{"type":"object","properties":{"x":{"type":"string","pattern":"`+strings.Repeat("(a|b)", 40000)+`"}}}`)
	measure("pattern nested", `{"type":"object","properties":{"x":{"type":"string","pattern":"`+strings.Repeat("(", 900)+"a"+strings.Repeat(")*", 900)+`"}}}`)
	measure("pattern rep", `{"type":"object","properties":{"x":{"type":"string","pattern":"`+strings.Repeat("a{1000}", 100)+`"}}}`)
}
