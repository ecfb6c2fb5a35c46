package egress_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/toolgate/toolgate/proxy/egress"
)

func ExampleClassify() {
	for _, s := range []string{"8.8.8.8", "10.1.2.3", "::ffff:127.0.0.1", "64:ff9b::a9fe:a9fe", "fd00:ec2::254", "100.64.0.1"} {
		fmt.Println(s, egress.Classify(netip.MustParseAddr(s)))
	}
	// Output:
	// 8.8.8.8 public
	// 10.1.2.3 private
	// ::ffff:127.0.0.1 loopback
	// 64:ff9b::a9fe:a9fe metadata
	// fd00:ec2::254 metadata
	// 100.64.0.1 cgnat
}

func ExampleGuard_Check() {
	cfg := egress.Config{Allow: []string{"10.20.0.0/16"}}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	g, err := egress.New(&cfg, egress.Options{ToolHosts: []string{"localhost:8080"}})
	if err != nil {
		panic(err)
	}
	for _, h := range []string{"169.254.169.254", "10.20.1.2", "10.30.1.2", "localhost", "0x7f.1"} {
		addrs, err := g.Check(context.Background(), h, "8080")
		var d *egress.DeniedError
		switch {
		case errors.As(err, &d):
			fmt.Printf("%s: refused (%s)\n", h, d.Class)
		case err != nil:
			fmt.Printf("%s: %v\n", h, err)
		case addrs == nil:
			fmt.Printf("%s: a tool host, dialled as given\n", h)
		default:
			fmt.Printf("%s: dial %v\n", h, addrs)
		}
	}
	// Output:
	// 169.254.169.254: refused (metadata)
	// 10.20.1.2: dial [10.20.1.2:8080]
	// 10.30.1.2: refused (private)
	// localhost: a tool host, dialled as given
	// 0x7f.1: refused (ambiguous)
}
