#!/usr/bin/env bash
# testdeps.sh — installs the Debian packages toolgate's tests use, when any is
# missing. `make test` and `make bench` run it first, so a fresh machine needs
# only Go.
#
#   clickhouse-server, clickhouse-client  events tests (private servers, scripts/clickhouse.sh)
#   chromium                              the dashboard's browser test
#   wabt                                  wat2wasm, for `make wasm-fixtures`
#   iproute2, iptables, curl, python3-requests
#                                         the transparent-mode test in network namespaces
#   python3-flask, nginx                  the adversarial suite's upstreams (proxy/adversarial)
#
# Already-installed packages are left alone; nothing is upgraded.
#
# It also installs the npm packages of proxy/testdata/mcpts (the TypeScript
# MCP SDK v2 client and server and the MCP conformance suite, pinned by its
# package-lock.json) with `npm ci`, when node and npm are present and the
# installed tree is missing or older than the lockfile. Without node the
# TypeScript SDK and conformance tests skip, saying so.
set -euo pipefail

die() {
	echo "testdeps.sh: $*" >&2
	exit 1
}

# Each entry: package:command-or-path that proves it is installed.
readonly WANTED=(
	clickhouse-server:/usr/sbin/clickhouse-server
	clickhouse-client:/usr/bin/clickhouse-client
	chromium:/usr/bin/chromium
	wabt:/usr/bin/wat2wasm
	iproute2:/usr/sbin/ip
	iptables:/usr/sbin/iptables
	curl:/usr/bin/curl
	python3-requests:/usr/lib/python3/dist-packages/requests/__init__.py
	python3-flask:/usr/lib/python3/dist-packages/flask/__init__.py
	nginx:/usr/sbin/nginx
)

# npm_deps installs the MCP test folder's npm packages from its lockfile.
npm_deps() {
	local dir
	dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/proxy/testdata/mcpts"
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		echo "testdeps.sh: node/npm not found; the TypeScript MCP SDK tests will skip (they need Node 20 or later)" >&2
		return 0
	fi
	if [[ -e $dir/node_modules/.package-lock.json && ! $dir/package-lock.json -nt $dir/node_modules/.package-lock.json ]]; then
		return 0
	fi
	echo "testdeps.sh: installing the npm packages of $dir (npm ci)" >&2
	(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) ||
		die "npm ci in $dir failed; see its output above"
}
npm_deps

missing=()
for w in "${WANTED[@]}"; do
	[[ -e ${w#*:} ]] || missing+=("${w%%:*}")
done
if ((${#missing[@]} == 0)); then
	echo "testdeps.sh: every test dependency is installed" >&2
	exit 0
fi
echo "testdeps.sh: installing ${missing[*]} with apt-get" >&2
command -v apt-get >/dev/null ||
	die "apt-get not found; install these (or their equivalents) by hand: ${missing[*]}"
sudo=()
if ((EUID != 0)); then
	command -v sudo >/dev/null || die "not root and no sudo; run as root: apt-get install -y ${missing[*]}"
	sudo=(sudo)
fi
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q ||
	die "apt-get update failed; see its output above"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" ||
	die "apt-get install ${missing[*]} failed; see its output above"
for w in "${WANTED[@]}"; do
	[[ -e ${w#*:} ]] || die "apt-get finished but ${w#*:} (package ${w%%:*}) is still missing"
done
echo "testdeps.sh: installed ${missing[*]}" >&2
