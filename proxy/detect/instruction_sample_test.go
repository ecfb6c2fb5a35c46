package detect_test

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/proxy/detect"
)

// sampleItem is one labelled text of testdata/instructions/sample.jsonl.
type sampleItem struct {
	ID     string `json:"id"`
	Label  string `json:"label"`
	Source string `json:"source"`
	Text   string `json:"text"`
}

func loadSample(t testing.TB, name string) []sampleItem {
	t.Helper()
	f, err := os.Open("testdata/instructions/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var items []sampleItem
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var it sampleItem
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
			t.Fatal(err)
		}
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return items
}

// TestInstructionSample measures the instruction heuristic on the
// labelled sample (testdata/instructions/README.md says where each item
// comes from) and holds it to the precision and recall measured, less
// some headroom. sample.jsonl is the set the weights were set on;
// heldout.jsonl was built afterwards, measured, then used to generalise
// the cues; blind.jsonl was built before that and scored once, at the
// end. The figures are in the package doc and docs/answers.md; change
// them together.
func TestInstructionSample(t *testing.T) {
	d, err := detect.New(detect.Config{Detect: []string{detect.GroupInstructions}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file                    string
		minItems                int
		minPrecision, minRecall float64
	}{
		// Measured 2026-12-01 (TP FP TN FN): sample 69 3 118 26, precision
		// 0.958 recall 0.726; heldout 32 0 70 18, 1.000 0.640; blind 24 0
		// 50 26, 1.000 0.480. The floors leave headroom for an item or two.
		{"sample.jsonl", 200, 0.90, 0.66},
		{"heldout.jsonl", 100, 0.90, 0.58},
		{"blind.jsonl", 100, 0.90, 0.42},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			items := loadSample(t, tc.file)
			if len(items) < tc.minItems {
				t.Fatalf("%s has %d items, want at least %d", tc.file, len(items), tc.minItems)
			}
			prec, rec := measure(t, d, items)
			if prec < tc.minPrecision || rec < tc.minRecall {
				t.Errorf("precision %.3f recall %.3f, want at least %.2f and %.2f", prec, rec, tc.minPrecision, tc.minRecall)
			}
		})
	}
}

// measure scores every item, logs each miss and false positive and the
// confusion counts (overall and per source), and returns precision and
// recall.
func measure(t *testing.T, d *detect.Detector, items []sampleItem) (precision, recall float64) {
	type counts struct{ tp, fp, tn, fn int }
	var all counts
	bySource := map[string]*counts{}
	for _, it := range items {
		src := "hand-written"
		if strings.HasPrefix(it.Source, "microsoft/BIPIA") {
			src = "BIPIA"
		}
		c := bySource[src]
		if c == nil {
			c = &counts{}
			bySource[src] = c
		}
		hit := len(d.ScanText(it.Text).Findings) > 0
		inj := it.Label == "injection"
		cues, score := detect.Cues(it.Text)
		switch {
		case hit && inj:
			all.tp++
			c.tp++
		case hit && !inj:
			all.fp++
			c.fp++
			t.Logf("false positive %s (score %d, %v) %.60q", it.ID, score, cues, it.Text)
		case !hit && inj:
			all.fn++
			c.fn++
			t.Logf("missed %s (score %d, %v) %.60q", it.ID, score, cues, it.Text)
		default:
			all.tn++
			c.tn++
		}
	}
	precision = float64(all.tp) / float64(max(1, all.tp+all.fp))
	recall = float64(all.tp) / float64(max(1, all.tp+all.fn))
	t.Logf("instruction heuristic on %d texts: TP %d FP %d TN %d FN %d; precision %.3f recall %.3f",
		len(items), all.tp, all.fp, all.tn, all.fn, precision, recall)
	for src, c := range bySource {
		t.Logf("  %s: TP %d FP %d TN %d FN %d", src, c.tp, c.fp, c.tn, c.fn)
	}
	return precision, recall
}
