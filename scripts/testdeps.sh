#!/usr/bin/env bash
# testdeps.sh — installs the Debian packages toolgate's tests use, when any is
# missing. `make test` and `make bench` run it first, so a fresh machine needs
# only Go.
#
#   clickhouse-server, clickhouse-client  events tests (private servers, scripts/clickhouse.sh)
#   zookeeper                             the ClickHouse cluster tests (internal/chtest StartCluster)
#   redis-server, redis-tools             the fleet state tests (private servers, a 3-node cluster, a Sentinel run as
#                                         redis-server --sentinel, internal/redistest) and make bench's BenchmarkAdmitFleet
#   chromium                              the dashboard's browser test
#   wabt                                  wat2wasm, for `make wasm-fixtures`
#   iproute2, iptables, curl, python3-requests
#                                         the transparent-mode test in network namespaces
#   python3-flask, nginx                  the adversarial suite's upstreams (proxy/adversarial)
#   libnginx-mod-http-lua                 nginx's Lua module, for the external benchmark's nginx + OPA peer,
#                                         whose agreement with toolgate internal/extbench's tests check
#   jq, nodejs                            the doc test's examples (docs/events.md, docs/quickstart.md)
#
# With --bench (make bench, make bench-external) it also installs what the
# external benchmark (internal/extbench) runs beside toolgate:
#
#   wrk, squid                            the load generator and the forward proxy compared
#
# Already-installed packages are left alone; nothing is upgraded.
#
# It also installs the npm packages of proxy/testdata/mcpts (the TypeScript
# MCP SDK v2 client and server, the SDK v1 client, the MCP Inspector CLI, the
# AI SDK's MCP client, the reference server server-everything and the MCP
# conformance suite, pinned by its package-lock.json) with `npm ci`, when node and npm are present and the
# installed tree is missing or older than the lockfile. Without node the
# TypeScript SDK and conformance tests skip, saying so.
set -euo pipefail

die() {
	echo "testdeps.sh: $*" >&2
	exit 1
}

# Each entry: package:command-or-path that proves it is installed.
WANTED=(
	clickhouse-server:/usr/sbin/clickhouse-server
	clickhouse-client:/usr/bin/clickhouse-client
	zookeeper:/usr/share/java/zookeeper.jar
	redis-server:/usr/bin/redis-server
	redis-tools:/usr/bin/redis-cli
	chromium:/usr/bin/chromium
	wabt:/usr/bin/wat2wasm
	iproute2:/usr/sbin/ip
	iptables:/usr/sbin/iptables
	curl:/usr/bin/curl
	python3-requests:/usr/lib/python3/dist-packages/requests/__init__.py
	python3-flask:/usr/lib/python3/dist-packages/flask/__init__.py
	nginx:/usr/sbin/nginx
	libnginx-mod-http-lua:/usr/lib/nginx/modules/ngx_http_lua_module.so
	jq:/usr/bin/jq
	nodejs:/usr/bin/node
	openssl:/usr/bin/openssl
)
if [[ ${1:-} == --bench ]]; then
	WANTED+=(wrk:/usr/bin/wrk squid:/usr/sbin/squid)
fi
readonly WANTED

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
	(cd "$dir" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error) ||
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
# quiet drops the lines apt-get prints that need no action: invoke-rc.d
# refusing to start a service (a container's policy-rc.d, or ours below)
# and debconf's notices about its frontend.
quiet() {
	grep -v -e '^invoke-rc.d: policy-rc.d denied execution of' -e '^debconf: ' >&2 || true
}
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q ||
	die "apt-get update failed; see its output above"
# The tests start private servers; the packages' own services (ClickHouse,
# nginx, Redis) must not start now nor at boot. A policy-rc.d that exits 101 keeps
# them from starting during the install (unless one is already in place).
own_policy=false
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
	printf '#!/bin/sh\n# testdeps.sh: no service starts while it installs packages\nexit 101\n' |
		"${sudo[@]}" tee /usr/sbin/policy-rc.d >/dev/null
	"${sudo[@]}" chmod 755 /usr/sbin/policy-rc.d
	own_policy=true
fi
status=0
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" 2> >(quiet) || status=$?
if $own_policy; then
	"${sudo[@]}" rm -f /usr/sbin/policy-rc.d
fi
((status == 0)) || die "apt-get install ${missing[*]} failed; see its output above"
for w in "${WANTED[@]}"; do
	[[ -e ${w#*:} ]] || die "apt-get finished but ${w#*:} (package ${w%%:*}) is still missing"
done
# Keep the services the packages ship off at boot.
for svc in clickhouse-server nginx redis-server; do
	[[ " ${missing[*]} " == *" $svc "* ]] || continue
	if command -v systemctl >/dev/null; then # edits the unit links even when systemd is not running
		now=()
		[[ -d /run/systemd/system ]] && now=(--now)
		"${sudo[@]}" systemctl disable "${now[@]}" "$svc" >/dev/null 2>&1 || true
	fi
	if command -v update-rc.d >/dev/null; then # the SysV links
		"${sudo[@]}" update-rc.d "$svc" disable >/dev/null 2>&1 || true
	fi
	echo "testdeps.sh: $svc's own service is disabled at boot (the tests start private servers)" >&2
done
echo "testdeps.sh: installed ${missing[*]}" >&2
