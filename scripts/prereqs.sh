#!/usr/bin/env bash
# Installs the Debian packages fleet-role's builds and tests need, when
# missing (sourced by the other scripts, so each does its own set-up). They
# come in groups, so that a script installs only what it uses:
#
# build (every build):
# - protoc (protobuf-compiler): the etcd client's build compiles etcd's
#   protocol files with it, and they import protobuf's own descriptor and
#   struct files (libprotobuf-dev: protoc only recommends it, and
#   --no-install-recommends leaves it out);
# - dpkg-deb and dpkg-shlibdeps (dpkg-dev): the Debian packages are written
#   with the first, their library dependencies read with the second.
# image (scripts/image.sh, scripts/release.sh):
# - podman: builds the controller's image and runs it in a test, with runc
#   (this machine's hybrid cgroups are refused by crun, the runtime podman
#   would take).
# registry (scripts/release.sh's check of the image, scripts/check-image.sh):
# - docker-registry: the CNCF distribution registry, run on a loopback port;
# - containerd and ctr (containerd): k3s's own runtime, the image imported
#   into it and pushed and pulled through the registry.
# lint (scripts/release.sh, and the suite's lintian test):
# - lintian: Debian's checker, run on the packages.
# cross (scripts/release.sh, scripts/package.sh --target aarch64-...):
# - the aarch64 cross linker and C compiler (gcc-aarch64-linux-gnu, for
#   ring's C and assembly too) with glibc's arm64 files
#   (libc6-dev-arm64-cross, under /usr/aarch64-linux-gnu);
# - qemu-aarch64 (qemu-user), which runs the aarch64 binaries here
#   (`-L /usr/aarch64-linux-gnu`); --no-install-recommends leaves out
#   qemu-user-binfmt, so nothing is registered with the kernel.
# test (the suite's, scripts/test.sh):
# - flock(1) (util-linux): a test holds the host lock from another process;
# - systemd-nspawn (systemd-container): boots each real-systemd lab host;
# - ip(8) (iproute2): makes the lab's network namespaces;
# - iptables: the chaos campaign's network faults, in a host's namespace;
# - libfaketime: a test runs the actuator with its clock set off the API
#   server's (LD_PRELOAD);
# - promtool (prometheus): checks the metrics scrapes and the alert rules;
#   the prometheus server its package also holds is never started;
# - dockerd (docker.io, Debian 12's Docker 20.10, with its containerd and
#   runc): the Docker Engine client's tests (crates/dockerengine) run a
#   private daemon of their own; no system daemon is started (no init runs
#   here).
# - etcdctl (etcd-client, 3.4): the runbooks' etcd commands, run as the
#   docs give them on a lab server (each host sees the machine's /usr).
# --no-install-recommends keeps them lean.
#
# FLEET_ROLE_PREREQS names the groups, separated by spaces; unset, it is
# "build image lint test", everything the suite needs (not cross).
# scripts/test.sh installs `build` first and the rest beside the build,
# which is CPU-bound while apt mostly waits on the network and the disk.
groups=" ${FLEET_ROLE_PREREQS:-build image lint test} "
for group in $groups; do
  case $group in build|image|registry|lint|cross|test) ;;
    *) echo "scripts/prereqs.sh: no group '$group' (build, image, registry, lint, cross, test)" >&2; return 2 2>/dev/null || exit 2 ;;
  esac
done
need=()
case $groups in *" build "*)
  command -v protoc >/dev/null || need+=(protobuf-compiler)
  [ -f /usr/include/google/protobuf/descriptor.proto ] || need+=(libprotobuf-dev)
  command -v dpkg-shlibdeps >/dev/null || need+=(dpkg-dev)
esac
case $groups in *" image "*)
  command -v podman >/dev/null || need+=(podman)
  command -v runc >/dev/null || need+=(runc)
esac
case $groups in *" registry "*)
  command -v docker-registry >/dev/null || need+=(docker-registry)
  command -v ctr >/dev/null || need+=(containerd)
esac
case $groups in *" lint "*)
  command -v lintian >/dev/null || need+=(lintian)
esac
case $groups in *" cross "*)
  command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
  [ -f /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ] || need+=(libc6-dev-arm64-cross)
  command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
esac
case $groups in *" test "*)
  command -v flock >/dev/null || need+=(util-linux)
  command -v systemd-nspawn >/dev/null || need+=(systemd-container)
  command -v ip >/dev/null || need+=(iproute2)
  command -v iptables >/dev/null || need+=(iptables)
  [ -f /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || need+=(libfaketime)
  command -v promtool >/dev/null || need+=(prometheus)
  command -v etcdctl >/dev/null || need+=(etcd-client)
  command -v dockerd >/dev/null || need+=(docker.io)
esac
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
case $groups in *" test "*)
  inotify=/proc/sys/fs/inotify/max_user_instances
  if [ -w "$inotify" ] && [ "$(cat "$inotify")" -lt 1024 ]; then
    echo 1024 > "$inotify"
  fi
esac
unset groups need group
