package lockguard

import (
	"bytes"
	"fmt"
	"sync"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/initlock/initlock/config/protection"
)

// DefaultName is the name config/default gives the lock guard's
// ValidatingAdmissionPolicy and its binding: the file's "lock-guard" with
// the install's name prefix, "initlock-".
const DefaultName = "initlock-lock-guard"

// Shipped returns the lock guard initlock ships, the policy and its binding
// of config/protection/lock-guard.yaml as embedded in the binary
// (protection.LockGuard), named as the file names them (without the
// install's prefix). Each call returns objects of its own.
func Shipped() (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding, error) {
	g, err := shipped()
	if err != nil {
		return nil, nil, err
	}
	return g.policy.DeepCopy(), g.binding.DeepCopy(), nil
}

type guard struct {
	policy  *admissionv1.ValidatingAdmissionPolicy
	binding *admissionv1.ValidatingAdmissionPolicyBinding
}

// shipped parses the embedded file once.
var shipped = sync.OnceValues(func() (guard, error) { return parse(protection.LockGuard()) })

// parse reads a ValidatingAdmissionPolicy and its binding from the YAML
// documents of b, strictly: an unknown field is an error.
func parse(b []byte) (guard, error) {
	var g guard
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return guard{}, fmt.Errorf("reading %s: %w", protection.LockGuardFile, err)
		}
		var err error
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			g.policy = &admissionv1.ValidatingAdmissionPolicy{}
			err = yaml.UnmarshalStrict(doc, g.policy)
		case "ValidatingAdmissionPolicyBinding":
			g.binding = &admissionv1.ValidatingAdmissionPolicyBinding{}
			err = yaml.UnmarshalStrict(doc, g.binding)
		}
		if err != nil {
			return guard{}, fmt.Errorf("reading %s: %w", protection.LockGuardFile, err)
		}
	}
	if g.policy == nil || g.binding == nil {
		return guard{}, fmt.Errorf("%s: want a ValidatingAdmissionPolicy and its binding", protection.LockGuardFile)
	}
	return g, nil
}
