// Command helm is the real Helm, built from the Go module proxy so that
// fleet-role's tests lint, render, install, upgrade and uninstall its chart
// (deploy/chart/fleet-role) with the real thing. A test tool only: fleet-role
// ships no Go. It is helm's own main (cmd/helm) without the client auth
// plugins, which the tests' kubeconfigs (a client certificate) never use.
package main

import (
	"errors"
	"log/slog"
	"os"

	helmcmd "helm.sh/helm/v4/pkg/cmd"
	"helm.sh/helm/v4/pkg/kube"
)

func main() {
	// The field manager the API server records, as helm's own build names it.
	kube.ManagedFieldsManager = "helm"
	cmd, err := helmcmd.NewRootCmd(os.Stdout, os.Args[1:], helmcmd.SetupLogging)
	if err != nil {
		slog.Warn("command failed", slog.Any("error", err))
		os.Exit(1)
	}
	if err := cmd.Execute(); err != nil {
		if cerr, ok := errors.AsType[helmcmd.CommandError](err); ok {
			os.Exit(cerr.ExitCode)
		}
		os.Exit(1)
	}
}
