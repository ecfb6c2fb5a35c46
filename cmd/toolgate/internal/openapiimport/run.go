package openapiimport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/atomicfile"
)

// DefaultFetchTimeout bounds fetching a document from a URL.
const DefaultFetchTimeout = 30 * time.Second

// RunOptions are `toolgate tools import openapi`'s flags.
type RunOptions struct {
	// Source is the document: a file, or an http or https URL. Required.
	Source string
	// Output is the file to write; "" writes the tools to stdout.
	Output string
	// DryRun prints the report (and, with Output, the changes against it)
	// without writing anything. Default false.
	DryRun bool
	// Import says how operations become tools.
	Import Options
	// Timeout bounds fetching a URL. Default DefaultFetchTimeout.
	Timeout time.Duration
}

// ErrNothingImported is returned when no operation became a tool.
var ErrNothingImported = errors.New("no operation could be imported")

// Run imports the document and writes the tools: to stdout (the report to
// stderr), or to Output (the report, and the changes against the file as
// it was, to stdout). An existing Output is replaced only after the
// changes are printed, and not at all with DryRun.
func Run(ctx context.Context, opts RunOptions, stdout, stderr io.Writer) error {
	data, err := readSource(ctx, opts)
	if err != nil {
		return err
	}
	res, err := Import(ctx, data, opts.Import)
	if err != nil {
		return fmt.Errorf("import %s: %w", opts.Source, err)
	}
	report := stderr
	if opts.Output != "" || opts.DryRun {
		report = stdout
	}
	printReport(report, res)
	if len(res.Tools) == 0 {
		return fmt.Errorf("import %s: %w", opts.Source, ErrNothingImported)
	}
	out, err := Render(res, opts.Source)
	if err != nil {
		return err
	}
	if opts.Output == "" {
		if opts.DryRun {
			return nil
		}
		_, err := stdout.Write(out)
		return err
	}
	old, err := os.ReadFile(opts.Output)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(stdout, "%s: new file, %d tools\n", opts.Output, len(res.Tools))
	case err != nil:
		return fmt.Errorf("read %s: %w", opts.Output, err)
	default:
		changes, err := Diff(old, res)
		if err != nil {
			return fmt.Errorf("%s: %w", opts.Output, err)
		}
		printChanges(stdout, opts.Output, changes, len(res.Tools))
	}
	if opts.DryRun {
		fmt.Fprintf(stdout, "dry run: %s not written\n", opts.Output)
		return nil
	}
	if err := atomicfile.WriteFile(opts.Output, out, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", opts.Output, err)
	}
	fmt.Fprintf(stdout, "wrote %s\n", opts.Output)
	return nil
}

func printReport(w io.Writer, res *Result) {
	fmt.Fprintf(w, "%s %s (OpenAPI %s): %d operations imported, %d refused\n", orDefault(res.Title, "untitled"), res.Version, res.OpenAPI, len(res.Tools), len(res.Refused))
	for _, r := range res.Refused {
		fmt.Fprintf(w, "refused %s\n", r)
	}
	for _, t := range res.Tools {
		for _, n := range t.Notes {
			fmt.Fprintf(w, "note %s: %s\n", t.Name, n)
		}
	}
}

func printChanges(w io.Writer, file string, changes []Change, total int) {
	if len(changes) == 0 {
		fmt.Fprintf(w, "%s: no change to its %d tools\n", file, total)
		return
	}
	fmt.Fprintf(w, "%s: %d tools changed\n", file, len(changes))
	for _, c := range changes {
		mark := map[string]string{"added": "+", "removed": "-", "changed": "~"}[c.Kind]
		fmt.Fprintf(w, "%s %s (%s)\n", mark, c.Name, c.Kind)
		for _, wh := range c.What {
			fmt.Fprintf(w, "    %s\n", wh)
		}
	}
}

// readSource reads the document from its file or URL, at most
// MaxDocumentBytes.
func readSource(ctx context.Context, opts RunOptions) ([]byte, error) {
	src := opts.Source
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		timeout := opts.Timeout
		if timeout <= 0 {
			timeout = DefaultFetchTimeout
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
		if err != nil {
			return nil, fmt.Errorf("fetch %s: %w", src, err)
		}
		req.Header.Set("Accept", "application/yaml, application/json;q=0.9, */*;q=0.1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("fetch %s: %w", src, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("fetch %s: %s", src, resp.Status)
		}
		return readUpTo(resp.Body, src)
	}
	f, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readUpTo(f, src)
}

func readUpTo(r io.Reader, name string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(b) > MaxDocumentBytes {
		return nil, fmt.Errorf("read %s: %w: larger than %d bytes", name, ErrDocument, MaxDocumentBytes)
	}
	return b, nil
}
