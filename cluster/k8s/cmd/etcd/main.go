// etcd built from go.etcd.io/etcd/server/v3 at the version kube-apiserver
// was tested with (taken from k8s.io/kubernetes' own go.mod).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
