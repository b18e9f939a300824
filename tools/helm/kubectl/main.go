// Command kubectl is the real kubectl, built from the k8s.io/kubectl library
// at the release helm brings, so that fleet-role's tests run the runbooks of
// docs/recovery.md as an operator would. A test tool only: fleet-role ships
// no Go. It is kubectl's own main (kubernetes/cmd/kubectl) without the
// client auth plugins, which the tests' kubeconfigs never use.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
