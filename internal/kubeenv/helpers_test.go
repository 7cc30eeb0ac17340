package kubeenv_test

import "k8s.io/apimachinery/pkg/util/validation"

func validateDNSLabel(s string) []string { return validation.IsDNS1123Label(s) }
