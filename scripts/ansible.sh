#!/usr/bin/env bash
# Installs ansible-core (one pinned version, from PyPI) into a virtualenv
# under .cache/ansible/ once and prints the path of its ansible-playbook.
# The test of deploy/ansible/ runs it inside a lab host, which shares this
# machine's /usr: so the virtualenv is made from the system's
# /usr/bin/python3, which the host has too.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
version=2.19.14
venv="$top/.cache/ansible/ansible-core-$version"
bin="$venv/bin/ansible-playbook"
# The marker is written last: a half-made virtualenv is made again.
if [ -x "$bin" ] && [ -e "$venv/.complete" ]; then
  echo "$bin"
  exit 0
fi
python=/usr/bin/python3
[ -x "$python" ] || { echo "$python is needed (Debian's python3 and python3-venv)" >&2; exit 2; }
echo "installing ansible-core $version into $venv (first time only)" >&2
rm -rf "$venv"
"$python" -m venv "$venv" >&2
"$venv/bin/pip" install --quiet --disable-pip-version-check --timeout 60 "ansible-core==$version" >&2
touch "$venv/.complete"
echo "$bin"
