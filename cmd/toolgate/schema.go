package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/exit"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/clickhouse"
)

func newSchemaCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "schema",
		Short: "The ClickHouse schema toolgate owns; argument schemas suggested from observed calls",
		Args:  exactArgs(0),
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(newSchemaPrintCmd(), newSchemaSuggestCmd())
	return c
}

func newSchemaPrintCmd() *cobra.Command {
	var db, server string
	var layout clickhouse.Layout
	c := &cobra.Command{
		Use:   "print",
		Short: "Print the DDL that creates toolgate's ClickHouse tables, for DBAs who apply it by hand",
		Long: `Print writes every statement toolgate's migrations run, in order, each ending
with ';'. Apply it by hand and set events.clickhouse.migrate: false.

--server picks the column types: a version before 19.9 (such as Debian's 18.16)
gets DateTime with a microsecond column and plain String; 19.9 and later get
LowCardinality(String).

--cluster writes the DDL for a ClickHouse cluster, as events.clickhouse.cluster
makes toolgate run it: every statement ON CLUSTER, replicated NAME_local
tables and a Distributed NAME over them (docs/scale.md).`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			var major, minor uint64
			if _, err := fmt.Sscanf(server, "%d.%d", &major, &minor); err != nil {
				return exit.AsUsage(fmt.Errorf("--server %q: want a version such as 18.16 or 24.3", server))
			}
			if err := sink.CheckDatabaseName(db); err != nil {
				return exit.AsUsage(fmt.Errorf("--database %w", err))
			}
			cfg := clickhouse.Config{Database: db, Cluster: layout.Cluster, ReplicaPath: layout.ReplicaPath, ReplicaName: layout.ReplicaName}
			if err := cfg.Validate(); err != nil {
				return exit.AsUsage(fmt.Errorf("--cluster, --replica-path, --replica-name: %w", err))
			}
			stmts, err := clickhouse.Layout{Cluster: cfg.Cluster, ReplicaPath: cfg.ReplicaPath, ReplicaName: cfg.ReplicaName}.
				SchemaDDL(db, clickhouse.FlavorFor(major, minor))
			if err != nil {
				return err
			}
			for _, stmt := range stmts {
				fmt.Fprintf(c.OutOrStdout(), "%s;\n\n", stmt)
			}
			return nil
		},
	}
	c.Flags().StringVar(&db, "database", clickhouse.DefaultDatabase, "database name")
	c.Flags().StringVar(&server, "server", "18.16", "ClickHouse server version the DDL is for")
	c.Flags().StringVar(&layout.Cluster, "cluster", "", "cluster name: DDL ON CLUSTER, replicated and Distributed tables")
	c.Flags().StringVar(&layout.ReplicaPath, "replica-path", "", "ZooKeeper path of replicated tables (with --cluster; default "+clickhouse.DefaultReplicaPath+")")
	c.Flags().StringVar(&layout.ReplicaName, "replica-name", "", "replica name (with --cluster; default "+clickhouse.DefaultReplicaName+")")
	return c
}
