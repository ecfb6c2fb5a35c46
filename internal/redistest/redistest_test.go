package redistest

import (
	"strings"
	"testing"
)

func TestStartRestart(t *testing.T) {
	s := Start(t)
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Restart(t)
	if v, err := s.Do("GET", "k"); err != nil || v != "" {
		t.Fatalf("after restart GET k = %q, %v; want an empty server", v, err)
	}
}

func TestCluster(t *testing.T) {
	c := StartCluster(t)
	info, err := c.Nodes[0].Do("CLUSTER", "INFO")
	if err != nil || !strings.Contains(info, "cluster_known_nodes:3") {
		t.Fatalf("CLUSTER INFO = %q, %v", info, err)
	}
}

func TestSentinel(t *testing.T) {
	sn := StartSentinel(t)
	if _, err := sn.Master.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	sn.InSync(t)
	sn.Failover(t)
	if v, err := sn.Replica.Do("GET", "k"); err != nil || v != "v" {
		t.Fatalf("promoted replica GET k = %q, %v; want the master's write", v, err)
	}
	if info, err := sn.Replica.Do("INFO", "replication"); err != nil || !strings.Contains(info, "role:master") {
		t.Fatalf("replica after the failover: %q, %v; want role:master", info, err)
	}
}
