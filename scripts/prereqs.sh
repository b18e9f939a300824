#!/usr/bin/env bash
# Installs the Debian packages fleet-role's builds and tests need, when
# missing (sourced by the other scripts, so each does its own set-up):
# - flock(1) (util-linux): a test holds the host lock from another process;
# - systemd-nspawn (systemd-container): boots each real-systemd lab host;
# - ip(8) (iproute2): makes the lab's network namespaces;
# - iptables: the chaos campaign's network faults, in a host's namespace;
# - libfaketime: a test runs the actuator with its clock set off the API
#   server's (LD_PRELOAD);
# - protoc (protobuf-compiler): the etcd client's build compiles etcd's
#   protocol files with it, and they import protobuf's own descriptor and
#   struct files (libprotobuf-dev: protoc only recommends it, and
#   --no-install-recommends leaves it out);
# - lintian: Debian's checker, run on the packages by a test;
# - promtool (prometheus): checks the metrics scrapes and the alert rules;
# - podman: builds the controller's image (scripts/image.sh) and runs it in
#   a test, with runc (this machine's hybrid cgroups are refused by crun,
#   the runtime podman would take).
# - dockerd (docker.io, Debian 12's Docker 20.10, with its containerd and
#   runc): the Docker Engine client's tests (crates/dockerengine) run a
#   private daemon of their own; no system daemon is started (no init runs
#   here);
# --no-install-recommends keeps them lean; the prometheus server its package
# also holds is never started either.
#
# With FLEET_ROLE_PREREQS=build, only what the build itself needs (protoc
# and protobuf's files): scripts/test.sh installs that first and the rest
# beside the build, which is CPU-bound while apt mostly waits on the
# network and the disk.
need=()
command -v protoc >/dev/null || need+=(protobuf-compiler)
[ -f /usr/include/google/protobuf/descriptor.proto ] || need+=(libprotobuf-dev)
if [ "${FLEET_ROLE_PREREQS:-all}" != build ]; then
  command -v flock >/dev/null || need+=(util-linux)
  command -v systemd-nspawn >/dev/null || need+=(systemd-container)
  command -v ip >/dev/null || need+=(iproute2)
  command -v iptables >/dev/null || need+=(iptables)
  [ -f /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || need+=(libfaketime)
  command -v lintian >/dev/null || need+=(lintian)
  command -v promtool >/dev/null || need+=(prometheus)
  command -v podman >/dev/null || need+=(podman)
  command -v runc >/dev/null || need+=(runc)
  command -v dockerd >/dev/null || need+=(docker.io)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Each lab host boots its own systemd, and each systemd takes inotify
# instances of its own: with three labs of up to five hosts side by side
# the kernel's default of 128 per user runs out, and a host's systemd then
# exits at boot ("Failed to create control group inotify object: Too many
# open files"). Raised for the whole machine, never lowered.
inotify=/proc/sys/fs/inotify/max_user_instances
if [ -w "$inotify" ] && [ "$(cat "$inotify")" -lt 1024 ]; then
  echo 1024 > "$inotify"
fi
