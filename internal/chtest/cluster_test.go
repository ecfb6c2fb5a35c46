package chtest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
)

// TestClusterReplicatesAndShards checks that a test cluster is a cluster: an
// ON CLUSTER statement reaches every server, a replicated table's rows reach
// the other replica, and a Distributed table spreads rows over both shards.
func TestClusterReplicatesAndShards(t *testing.T) {
	c := chtest.SharedCluster(t)
	if len(c.Servers) != chtest.ClusterServers {
		t.Fatalf("servers = %d, want %d", len(c.Servers), chtest.ClusterServers)
	}
	db := c.Database(t)
	s1, s2 := c.Servers[0], c.Servers[1]
	s1.Exec(t, "CREATE DATABASE "+db+" ON CLUSTER "+chtest.ShardsCluster)
	s1.Exec(t, "CREATE TABLE "+db+".r ON CLUSTER "+chtest.ReplicasCluster+
		" (id UInt64) ENGINE = ReplicatedMergeTree('/clickhouse/tables/"+db+"/r', '{replica}') ORDER BY id")
	s1.Exec(t, "INSERT INTO "+db+".r (id) SELECT number FROM numbers(100)")
	waitFor(t, s2, "SELECT count() FROM "+db+".r", "100")

	s1.Exec(t, "CREATE TABLE "+db+".l ON CLUSTER "+chtest.ShardsCluster+
		" (id UInt64) ENGINE = ReplicatedMergeTree('/clickhouse/tables/"+db+"/{shard}/l', '{replica}') ORDER BY id")
	s1.Exec(t, "CREATE TABLE "+db+".d ON CLUSTER "+chtest.ShardsCluster+
		" AS "+db+".l ENGINE = Distributed("+chtest.ShardsCluster+", "+db+", l, id)")
	s2.Exec(t, "INSERT INTO "+db+".d (id) SELECT number FROM numbers(100)") // forwarded to shard 1 in the background
	for i, s := range c.Servers {
		waitFor(t, s, "SELECT count() FROM "+db+".l", "50") // ids sharded by parity
		if got := s.Query(t, "SELECT count() FROM "+db+".d")[0][0]; got != "100" {
			t.Errorf("the Distributed table on server %d reads %s rows, want 100", i+1, got)
		}
	}
	macros := fmt.Sprint(s2.Query(t, "SELECT macro, substitution FROM system.macros ORDER BY macro"))
	if macros != "[[replica ch2] [shard 2]]" {
		t.Errorf("server 2 macros = %s", macros)
	}
}

// TestClusterZooKeeperRestart kills and restarts a cluster's ZooKeeper and
// checks the replicated table accepts inserts again.
func TestClusterZooKeeperRestart(t *testing.T) {
	c := chtest.StartCluster(t)
	s1 := c.Servers[0]
	s1.Exec(t, "CREATE DATABASE z ON CLUSTER "+chtest.ReplicasCluster)
	s1.Exec(t, "CREATE TABLE z.r ON CLUSTER "+chtest.ReplicasCluster+
		" (id UInt64) ENGINE = ReplicatedMergeTree('/clickhouse/tables/z/r', '{replica}') ORDER BY id")
	c.ZooKeeper.Kill()
	if _, err := s1.TryQuery("INSERT INTO z.r (id) VALUES (1)"); err == nil {
		t.Error("an insert into a replicated table succeeded with ZooKeeper away")
	}
	c.ZooKeeper.Restart(t)
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := s1.TryQuery("INSERT INTO z.r (id) VALUES (2)")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("inserts still fail 60s after ZooKeeper came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitFor(t, c.Servers[1], "SELECT groupArray(id) FROM z.r", "[2]")
}

// waitFor polls sql on s until it answers want (60 s at most).
func waitFor(t *testing.T, s *chtest.Server, sql, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		rows, err := s.TryQuery(sql)
		got := ""
		if err == nil && len(rows) == 1 {
			got = strings.Join(rows[0], "\t")
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s on %s: got %q (err %v), want %q after 60s", sql, s.Addr(), got, err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
