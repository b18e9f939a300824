// Command etcdutl is etcd's offline tool (its `snapshot` and `version`
// commands), built from etcd's own module for the lab's k3s stand-in: a
// cluster reset restores a snapshot through the same package k3s links,
// and etcd-bin-vendored ships the server only. Built by
// scripts/build-etcdutl.sh into .cache/, never shipped.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/etcdutl/v3/etcdutl"
)

func main() {
	root := &cobra.Command{
		Use:   "etcdutl",
		Short: "etcd's offline tool: snapshot restore and status",
	}
	root.PersistentFlags().StringVarP(&etcdutl.OutputFormat, "write-out", "w", "simple",
		"the output format (fields, json, protobuf, simple, table)")
	root.AddCommand(etcdutl.NewSnapshotCommand(), etcdutl.NewVersionCommand())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
