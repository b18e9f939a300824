#!/bin/sh
# fleet-role-actuator for {{node}}: made by `fleet-role enroll {{node}} --bundle DIR`.
# Copy DIR to {{node}} and run there, as root:   sh DIR/install.sh
# (add `--node {{node}}` when k3s runs there under a Node name that is not
# the hostname). It puts the token, the cluster's CA and actuator.toml in
# /etc/fleet-role (root's, modes 0600, 0644, 0640), enables and (re)starts
# fleet-role-actuator.service, and ends with `fleet-role-actuator status`,
# whose exit code it exits with. Every check comes first, the bundle's
# credential tried against the API included: a refusal changes nothing.
# Run again, it changes nothing and restarts nothing.
set -eu
umask 077
node='{{node}}'
# Where /etc is: the host's root, unless a test names another.
root=${FLEET_ROLE_ROOT:-}
here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd -P)

refuse() {
    echo "install.sh: refused, nothing changed: $*" >&2
    exit 1
}

asserted=
case "${1:-}" in
'') ;;
--node)
    [ "${2:-}" = "$node" ] || refuse "this bundle is for $node, not '${2:-}'"
    asserted=1
    ;;
*) refuse "usage: sh install.sh [--node $node]" ;;
esac

[ "$(id -u)" -eq 0 ] || refuse "run it as root"
command -v fleet-role-actuator >/dev/null 2>&1 \
    || refuse "fleet-role-actuator is not installed: install its package first"
[ -d "$root/etc/fleet-role" ] || refuse "$root/etc/fleet-role is missing: install fleet-role-actuator's package first"
for f in actuator.toml ca.crt token; do
    [ -f "$here/$f" ] && [ -s "$here/$f" ] || refuse "$here/$f is missing or empty: make the bundle again"
done
host=$(hostname)
if [ -z "$asserted" ] && [ "$host" != "$node" ]; then
    refuse "this host is $host and the bundle is for $node: run it on $node (or, if k3s runs here under the Node name $node, with --node $node)"
fi

# The actuator's own check with the bundle's files, before anything is
# installed: the API servers listed answer, verified with the bundle's CA,
# and the token reads this host's report. 5 (something on the host is
# degraded) is the host's state, not the bundle's: shown at the end.
set +e
check=$(env -u FLEET_ROLE_NODE -u FLEET_ROLE_API -u FLEET_ROLE_ROOT \
    FLEET_ROLE_CONFIG="$here/actuator.toml" FLEET_ROLE_CA_FILE="$here/ca.crt" \
    FLEET_ROLE_TOKEN_FILE="$here/token" fleet-role-actuator status 2>&1)
rc=$?
set -e
case $rc in
0 | 5) ;;
*)
    printf '%s\n' "$check" >&2
    refuse "fleet-role-actuator status with the bundle's files failed (exit $rc): no API server of $here/actuator.toml answered with this CA and token"
    ;;
esac

changed=
# place FILE DEST MODE: DEST replaced (a new file renamed over it) unless it
# already holds FILE with MODE, owned by root.
place() {
    if [ -f "$2" ] && cmp -s "$here/$1" "$2" && [ "$(stat -c '%a %u %g' "$2")" = "$3 0 0" ]; then
        return 0
    fi
    rm -f "$2.fleet-role-new"
    cp "$here/$1" "$2.fleet-role-new"
    chown root:root "$2.fleet-role-new"
    chmod "$3" "$2.fleet-role-new"
    mv -f "$2.fleet-role-new" "$2"
    changed=1
    echo "install.sh: wrote $2 (mode $3)"
}
place token "$root{{token}}" 600
place ca.crt "$root{{ca}}" 644
place actuator.toml "$root{{config}}" 640

systemctl enable --quiet fleet-role-actuator.service
if [ -n "$changed" ] || ! systemctl is-active --quiet fleet-role-actuator.service; then
    systemctl restart fleet-role-actuator.service
    echo "install.sh: fleet-role-actuator.service (re)started"
else
    echo "install.sh: nothing to change"
fi
exec env -u FLEET_ROLE_NODE -u FLEET_ROLE_API -u FLEET_ROLE_ROOT -u FLEET_ROLE_CA_FILE \
    -u FLEET_ROLE_TOKEN_FILE FLEET_ROLE_CONFIG="$root{{config}}" fleet-role-actuator status
