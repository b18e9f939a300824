#!/usr/bin/env bash
# Sourced with a Rust target triple: makes this machine build for it.
#
#   source scripts/cross.sh aarch64-unknown-linux-gnu
#
# - the target's Rust std (`rustup target add`, a no-op when it is there);
# - for aarch64-unknown-linux-gnu on another machine, Debian's cross
#   toolchain (scripts/prereqs.sh's `cross` group: gcc-aarch64-linux-gnu,
#   glibc's arm64 files under /usr/aarch64-linux-gnu, qemu-user) and the
#   environment cargo and the cc crate read: the linker
#   (CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER), the C compiler ring's
#   build uses (CC_aarch64_unknown_linux_gnu) and the runner for `cargo
#   test` (CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER, qemu-aarch64 with
#   the cross sysroot). Set in the environment rather than a committed
#   .cargo/config.toml, so that no other build sees them.
# Sets FLEET_ROLE_SYSROOT: where the target's glibc lives (`/` for this
# machine's own).
cross_triple=${1:?scripts/cross.sh needs a target triple}
cross_host=$(rustc -vV | sed -n 's/^host: //p')
case $cross_triple in
  x86_64-unknown-linux-gnu|aarch64-unknown-linux-gnu) ;;
  *) echo "scripts/cross.sh: no recipe for $cross_triple (x86_64-unknown-linux-gnu, aarch64-unknown-linux-gnu)" >&2
     return 2 2>/dev/null || exit 2 ;;
esac
if [ "$cross_triple" = "$cross_host" ]; then
  FLEET_ROLE_SYSROOT=/
else
  FLEET_ROLE_PREREQS="build cross" source "$(dirname "${BASH_SOURCE[0]}")/prereqs.sh"
  case $cross_triple in
    aarch64-unknown-linux-gnu)
      FLEET_ROLE_SYSROOT=/usr/aarch64-linux-gnu
      export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
      export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
      export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
      export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L $FLEET_ROLE_SYSROOT"
      ;;
    x86_64-unknown-linux-gnu)
      echo "scripts/cross.sh: no recipe for x86_64 from $cross_host" >&2
      return 2 2>/dev/null || exit 2 ;;
  esac
fi
if ! rustc --print target-libdir --target "$cross_triple" 2>/dev/null | xargs -I{} test -d {}; then
  rustup target add "$cross_triple"
fi
# rustup's own check too: it answers at once when the std is installed.
command -v rustup >/dev/null && rustup target add "$cross_triple" >/dev/null 2>&1 || true
export FLEET_ROLE_SYSROOT
unset cross_triple cross_host
