package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// defaultConfig is the configuration file a command reads when -c/--config
// names none: toolgate.yaml in the working directory.
const defaultConfig = "toolgate.yaml"

// checkConfigGiven returns an error saying which file was looked for and
// how to get one when the command c was given no -c/--config and path,
// the default, does not exist. A file that exists, or one named by
// the flag, is left for the loader to read (and to report on).
func checkConfigGiven(c *cobra.Command, path string) error {
	if c.Flags().Changed("config") {
		return nil
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	where := path
	if abs, err := filepath.Abs(path); err == nil {
		where = abs
	}
	return fmt.Errorf("no configuration: %s looked for %s, which does not exist\n"+
		"give one with %s -c FILE; to write one, start from examples/toolgate.yaml in toolgate's source tree "+
		"(every key, commented; docs/config.md) or the one-tool file of docs/quickstart.md",
		c.CommandPath(), where, c.CommandPath())
}
