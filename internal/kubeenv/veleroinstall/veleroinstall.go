// Package veleroinstall makes Velero's Deployment as the velero CLI makes
// it, with Velero's own code (v1.18.3): "velero install --plugins" builds it
// with pkg/install, and "velero plugin add" adds the init container of
// pkg/builder's ForPluginContainer, which derives the container's name from
// the image reference. Tests write the result to a real API server (a
// server-side dry run does) to learn whether Kubernetes accepts an image
// reference as a plugin.
//
// It is test support: it runs no Velero server and installs nothing.
package veleroinstall

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/vmware-tanzu/velero/pkg/builder"
	"github.com/vmware-tanzu/velero/pkg/install"
)

// Deployment is the Deployment "velero install --namespace namespace
// --plugins p1,p2,..." creates.
func Deployment(namespace string, plugins ...string) *appsv1.Deployment {
	return install.Deployment(namespace, install.WithPlugins(plugins))
}

// AddPlugin adds to d the init container "velero plugin add ref" adds, and
// returns it.
func AddPlugin(d *appsv1.Deployment, ref string) corev1.Container {
	spec := &d.Spec.Template.Spec
	c := *builder.ForPluginContainer(ref, corev1.PullIfNotPresent, spec.InitContainers).Result()
	spec.InitContainers = append(spec.InitContainers, c)
	return c
}
