package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunWithoutConfig checks what `toolgate run` says in a folder without
// toolgate.yaml and no -c: the file it looked for and how to get one (the
// files it names exist), starting nothing; and that a file named by -c, or
// a toolgate.yaml that is there, is read as before.
func TestRunWithoutConfig(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"examples/toolgate.yaml", "docs/config.md", "docs/quickstart.md"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Fatalf("the hint names %s: %v", f, err)
		}
	}
	for _, tc := range []struct {
		name  string
		args  []string
		file  string   // toolgate.yaml's content; "" for none
		want  []string // fragments of stderr
		never string   // a fragment stderr must not hold
	}{
		{name: "no flag, no file", args: []string{"run"},
			want: []string{"toolgate: no configuration: toolgate run looked for DIR/toolgate.yaml, which does not exist\n",
				"give one with toolgate run -c FILE;", "examples/toolgate.yaml", "docs/quickstart.md"}},
		{name: "policy check, no flag, no file", args: []string{"policy", "check"},
			want: []string{"toolgate: no configuration: toolgate policy check looked for DIR/toolgate.yaml, which does not exist\n",
				"give one with toolgate policy check -c FILE;"}},
		{name: "policy eval, no flag, no file", args: []string{"policy", "eval", "--tool", "search"},
			want: []string{"toolgate: no configuration: toolgate policy eval looked for DIR/toolgate.yaml, which does not exist\n",
				"give one with toolgate policy eval -c FILE;"}},
		{name: "a missing file named by -c", args: []string{"run", "-c", "mine.yaml"},
			want: []string{"toolgate: read config: open mine.yaml: no such file or directory\n"}, never: "no configuration"},
		{name: "toolgate.yaml is read by default", args: []string{"run"}, file: "lisen:\n  forward: 127.0.0.1:0\n",
			want: []string{"toolgate: toolgate.yaml:1: lisen: unknown field; did you mean listen?"}, never: "no configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			if tc.file != "" {
				writeFile(t, filepath.Join(dir, "toolgate.yaml"), tc.file)
			}
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stdout, &stderr); code != exitError {
				t.Errorf("exit code = %d, want %d", code, exitError)
			}
			msg := stderr.String()
			for _, w := range tc.want {
				if w = strings.ReplaceAll(w, "DIR", dir); !strings.Contains(msg, w) {
					t.Errorf("stderr lacks %q:\n%s", w, msg)
				}
			}
			if tc.never != "" && strings.Contains(msg, tc.never) {
				t.Errorf("stderr holds %q:\n%s", tc.never, msg)
			}
			if strings.Contains(msg, "toolgate running") || stdout.Len() > 0 {
				t.Errorf("something started:\nstdout: %s\nstderr: %s", stdout.String(), msg)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 0, false: 1}[tc.file == ""]; len(entries) != want {
				t.Errorf("the folder holds %d entries after the run, want %d: something started", len(entries), want)
			}
		})
	}
}
