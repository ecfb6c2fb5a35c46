package egress_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/proxy/egress"
)

func TestConfigValidateDefaults(t *testing.T) {
	var c egress.Config
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Mode != egress.ModeEnforce {
		t.Errorf("Mode = %q, want enforce", c.Mode)
	}
	if c.LookupTimeout != egress.DefaultLookupTimeout {
		t.Errorf("LookupTimeout = %s, want %s", c.LookupTimeout, egress.DefaultLookupTimeout)
	}
	if _, err := egress.New(&egress.Config{}, egress.Options{}); err == nil {
		t.Error("New took a Config that was not validated")
	}
}

func TestConfigValidate(t *testing.T) {
	good := []string{
		"10.0.0.0/8", "fd00::/8", "10.1.2.3", "fd00::1", "::ffff:10.1.2.3",
		"10.1.2.3:8080", "[fd00::1]:443", "db.internal", "db.internal:5432",
		"DB.Internal.", "*.corp.example", "*.corp.example:443", "metadata.google.internal",
		"169.254.169.254", "0.0.0.0/0", "::/0",
	}
	for _, s := range good {
		c := egress.Config{Allow: []string{s}}
		if err := c.Validate(); err != nil {
			t.Errorf("allow %q: %v", s, err)
		}
	}
	bad := []struct {
		name  string
		cfg   egress.Config
		field string // the field the error names
		says  string // part of its message
	}{
		{"mode", egress.Config{Mode: "off"}, "mode", `unknown mode "off"`},
		{"timeout", egress.Config{LookupTimeout: -time.Second}, "lookup_timeout", "must be positive"},
		{"empty", egress.Config{Allow: []string{"10.0.0.0/8", ""}}, "allow[1]", "is empty"},
		{"host bits", egress.Config{Allow: []string{"10.0.0.1/8"}}, "allow[0]", "did you mean 10.0.0.0/8"},
		{"bad prefix", egress.Config{Allow: []string{"10.0.0.0/33"}}, "allow[0]", "not a CIDR prefix"},
		{"mapped prefix", egress.Config{Allow: []string{"::ffff:10.0.0.0/104"}}, "allow[0]", "write it as IPv4"},
		{"port zero", egress.Config{Allow: []string{"10.1.2.3:0"}}, "allow[0]", "port 0"},
		{"bad port", egress.Config{Allow: []string{"db.internal:99999"}}, "allow[0]", `port "99999"`},
		{"leading zero port", egress.Config{Allow: []string{"db.internal:080"}}, "allow[0]", `port "080"`},
		{"ipv6 port without brackets", egress.Config{Allow: []string{"fd00::1::443"}}, "allow[0]", "[fd00::1]:443"},
		{"hex ipv4", egress.Config{Allow: []string{"0x7f.1"}}, "allow[0]", "not a valid host name"},
		{"short ipv4", egress.Config{Allow: []string{"127.1"}}, "allow[0]", "not a valid host name"},
		{"space", egress.Config{Allow: []string{"db internal"}}, "allow[0]", "not a valid host name"},
		{"zone", egress.Config{Allow: []string{"fe80::1%eth0"}}, "allow[0]", "zone"},
		{"wildcard address", egress.Config{Allow: []string{"*.10.0.0.1"}}, "allow[0]", "applies to names only"},
		{"empty label", egress.Config{Allow: []string{"db..internal"}}, "allow[0]", "not a valid host name"},
		{"too many", egress.Config{Allow: make([]string, egress.MaxAllowEntries+1)}, "allow", "at most"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			var fe *section.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Validate = %v, want a field error", err)
			}
			if fe.Path != tt.field || !strings.Contains(fe.Message(), tt.says) {
				t.Errorf("Validate = %q at %q, want %q at %q", fe.Message(), fe.Path, tt.says, tt.field)
			}
		})
	}
}
