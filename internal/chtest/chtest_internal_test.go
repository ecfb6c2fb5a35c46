package chtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseTSV(t *testing.T) {
	tests := []struct {
		name string
		body string
		want [][]string
	}{
		{"empty", "", nil},
		{"one empty value", "\n", [][]string{{""}}},
		{"rows", "1\ta\n2\tb\n", [][]string{{"1", "a"}, {"2", "b"}}},
		{"escapes", `a\tb\nc\\d\'e\0f\rg\bh\fi` + "\n", [][]string{{"a\tb\nc\\d'e\x00f\rg\bh\fi"}}},
		{"null", `\N` + "\t" + `\\N` + "\n", [][]string{{`\N`, `\N`}}},
		{"trailing backslash", `x\` + "\n", [][]string{{`x\`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseTSV(tt.body); !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("parseTSV(%q) = %q, want %q", tt.body, got, tt.want)
			}
		})
	}
}

func TestIdentifier(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"TestSink/Flush_batch-2", 40, "testsink_flush_batch_2"},
		{"Ü", 40, "__"},
		{"abcdefghij", 5, "abcde"},
	}
	for _, tt := range tests {
		if got := identifier(tt.in, tt.n); got != tt.want {
			t.Errorf("identifier(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

// TestErrorTailSummarizes checks what a failed test prints about a
// server: its errors without their stack traces (so an early error is not
// pushed out by later ones), and its DDL worker's last task and warnings.
func TestErrorTailSummarizes(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "log"), 0o755); err != nil {
		t.Fatal(err)
	}
	var errLog, srvLog strings.Builder
	errLog.WriteString("2026.11.24 12:18:35.812751 [ 21 ] {q1} <Error> executeQuery: Code: 44, e.displayText() = DB::Exception: the first error\n\n")
	for i := range 30 {
		fmt.Fprintf(&errLog, "%d. /lib/x86_64-linux-gnu/libclickhouse.so.18.16(+0x1ba00e8) [0x7f4715fa00e8]\n", i)
	}
	errLog.WriteString("2026.11.24 12:25:19.261916 [ 131 ] {q2} <Error> executeQuery: Code: 32, e.displayText() = DB::Exception: Attempt to read after eof\n")
	srvLog.WriteString("2026.11.24 12:18:30.000001 [ 3 ] {} <Debug> DDLWorker: Processing tasks\n")
	srvLog.WriteString("2026.11.24 12:18:30.000002 [ 3 ] {} <Debug> DDLWorker: Processing task query-0000000107 (ALTER TABLE db.events_local ON CLUSTER c ADD COLUMN x String)\n")
	srvLog.WriteString("2026.11.24 12:19:30.000003 [ 3 ] {} <Warning> db.events_local (StorageReplicatedMergeTree): Timeout when waiting for replica ch2 to apply ALTER. ALTER will be done asynchronously.\n")
	srvLog.WriteString("2026.11.24 12:19:31.000004 [ 3 ] {} <Error> DDLWorker: Unexpected error: boom. Terminating.\n")
	for name, body := range map[string]string{"error.log": errLog.String(), "server.log": srvLog.String()} {
		if err := os.WriteFile(filepath.Join(dir, "log", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := (&Server{dir: dir}).errorTail()
	for _, want := range []string{"the first error", "Attempt to read after eof", "Processing task query-0000000107", "to apply ALTER", "Terminating"} {
		if !strings.Contains(got, want) {
			t.Errorf("errorTail() lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"libclickhouse.so", "Processing tasks\n"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("errorTail() holds %q:\n%s", unwanted, got)
		}
	}
}

// TestDDLWorkerEnded reads the log of a 18.16 server whose DDL worker
// ended (testdata/ddlworker-ended.log, from this package's cluster in a CI
// run: two replicas both marked an ON CLUSTER ALTER done), and the same
// log without the ending, and with other errors in its place.
func TestDDLWorkerEnded(t *testing.T) {
	b, err := os.ReadFile("testdata/ddlworker-ended.log")
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	if !ddlWorkerEnded(strings.NewReader(log)) {
		t.Error("the log of an ended DDL worker reads as running")
	}
	without := strings.Replace(log, ". Terminating.\n", "", 1)
	if ddlWorkerEnded(strings.NewReader(without)) {
		t.Error("an unexpected ZooKeeper error that did not end the worker reads as its end")
	}
	other := strings.Replace(log, "DDLWorker: Unexpected ZooKeeper error", "executeQuery: Code: 44", 1)
	if ddlWorkerEnded(strings.NewReader(other)) {
		t.Error("another error followed by \"Terminating\" reads as the DDL worker's end")
	}
}
