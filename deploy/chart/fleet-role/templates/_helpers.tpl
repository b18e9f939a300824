{{/*
The controller's settings: .Values.settings, each a `key = value` line,
then .Values.config (TOML), as the ConfigMap holds them; a key in both is
TOML's duplicate key and fails. Then the names rendered
from them, each with the default the controller gives it and checked as
the controller checks it (crates/controller/src/config.rs), so that a bad
name fails the install rather than landing in a role or a CEL string.
*/}}
{{- define "fleet-role.config" -}}
{{- range $k, $v := .Values.settings -}}
{{- if not (regexMatch "^[a-z][a-z_]*$" $k) -}}
{{- fail (printf "settings: %q is no key of the controller's settings" $k) -}}
{{- end -}}
{{- if not (or (kindIs "string" $v) (kindIs "slice" $v)) -}}
{{- fail (printf "settings.%s: a string or a list of strings here; numbers and tables go in config" $k) -}}
{{- end -}}
{{- printf "%s = %s\n" $k (toJson $v) -}}
{{- end -}}
{{- .Values.config -}}
{{- end -}}

{{- define "fleet-role.setting" -}}
{{- $s := fromToml (include "fleet-role.config" .root) -}}
{{- if hasKey $s "Error" -}}
{{- fail (printf "config is not TOML: %s" (get $s "Error")) -}}
{{- end -}}
{{- $v := toString (get $s .key | default .default) -}}
{{- if or (gt (len $v) (int .max)) (not (regexMatch .pattern $v)) -}}
{{- fail (printf "config: %s = %q %s" .key $v .why) -}}
{{- end -}}
{{- $v -}}
{{- end -}}

{{- define "fleet-role.label" -}}
{{- include "fleet-role.setting" (dict "root" .root "key" .key "default" .default "max" 63 "pattern" "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" "why" "must be a DNS label") -}}
{{- end -}}

{{- define "fleet-role.subdomain" -}}
{{- include "fleet-role.setting" (dict "root" .root "key" .key "default" .default "max" 253 "pattern" "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" "why" "must be a DNS subdomain") -}}
{{- end -}}

{{- define "fleet-role.prefix" -}}
{{- include "fleet-role.subdomain" (dict "root" . "key" "prefix" "default" "github-runner.exadev.com") -}}
{{- end -}}
{{- define "fleet-role.leaseName" -}}
{{- include "fleet-role.subdomain" (dict "root" . "key" "lease_name" "default" "fleet-regrade") -}}
{{- end -}}
{{- define "fleet-role.reportNamespace" -}}
{{- include "fleet-role.label" (dict "root" . "key" "report_namespace" "default" "platform") -}}
{{- end -}}
{{- define "fleet-role.hostsNamespace" -}}
{{- include "fleet-role.label" (dict "root" . "key" "hosts_namespace" "default" "fleet-role-hosts") -}}
{{- end -}}
{{- define "fleet-role.leaderName" -}}
{{- include "fleet-role.subdomain" (dict "root" . "key" "leader_lease_name" "default" "fleet-role-leader") -}}
{{- end -}}
{{- define "fleet-role.leaderNamespace" -}}
{{- include "fleet-role.label" (dict "root" . "key" "leader_lease_namespace" "default" "platform") -}}
{{- end -}}
{{- define "fleet-role.adminGroup" -}}
{{- include "fleet-role.setting" (dict "root" . "key" "admin_group" "default" "system:masters" "max" 253 "pattern" "^[A-Za-z0-9:._@-]+$" "why" "must be 1 to 253 characters of letters, digits and : . _ @ -") -}}
{{- end -}}

{{/* The user names and group of the hosts' ServiceAccounts. */}}
{{- define "fleet-role.hostsGroup" -}}
system:serviceaccounts:{{ include "fleet-role.hostsNamespace" . }}
{{- end -}}
{{- define "fleet-role.usernamePrefix" -}}
system:serviceaccount:{{ include "fleet-role.hostsNamespace" . }}:fleet-role-actuator-
{{- end -}}
{{- define "fleet-role.legacyUsernamePrefix" -}}
system:serviceaccount:{{ include "fleet-role.reportNamespace" . }}:fleet-role-actuator-
{{- end -}}

{{/* The keys under the prefix. */}}
{{- define "fleet-role.reportRefused" -}}
{{ include "fleet-role.prefix" . }}/report-refused
{{- end -}}
{{- define "fleet-role.markList" -}}
{{- $p := include "fleet-role.prefix" . -}}
{{- $out := list -}}
{{- range list "desired-role" "role-swap" "role-step" "role-join-node" "snapshot-request" "protocol" -}}
{{- $out = append $out (printf "%s/%s" $p .) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}
{{- define "fleet-role.marks" -}}
{{- include "fleet-role.markList" . | fromJsonArray | join ", " -}}
{{- end -}}
{{- define "fleet-role.marksCel" -}}
{{- $out := list -}}
{{- range (include "fleet-role.markList" . | fromJsonArray) -}}
{{- $out = append $out (printf "'%s'" .) -}}
{{- end -}}
{{- join ", " $out -}}
{{- end -}}

{{/* The namespaces the objects live in, each once, in the manifests' order. */}}
{{- define "fleet-role.namespaces" -}}
{{- list "platform" (include "fleet-role.leaderNamespace" .) (include "fleet-role.hostsNamespace" .) (include "fleet-role.reportNamespace" .) | uniq | toJson -}}
{{- end -}}

{{- define "fleet-role.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
