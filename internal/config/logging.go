package config

// The json log format, registered as the upstream kubelet registers it, so
// that logging.format: json validates and applies.
import _ "k8s.io/component-base/logs/json/register"
