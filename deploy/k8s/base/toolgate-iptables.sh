#!/bin/sh
# toolgate-iptables.sh — send a pod's outbound HTTP and HTTPS to toolgate's
# transparent listener, the way Istio's init container does for Envoy.
#
#   toolgate-iptables.sh install   add the rules (idempotent: removes old ones first)
#   toolgate-iptables.sh remove    delete them
#   toolgate-iptables.sh show      print the nat table's toolgate chain
#
# Environment (defaults in brackets):
#   TOOLGATE_UID     the uid toolgate runs as; its own traffic is never redirected [1337]
#   TOOLGATE_PORT    the transparent listener's port on 127.0.0.1 [15001]
#   TOOLGATE_PORTS   destination ports to redirect, space separated [80 443]
#   TOOLGATE_CHAIN   the nat chain the rules live in [TOOLGATE_OUTPUT]
#
# Only locally generated traffic (the OUTPUT chain) is redirected, so inbound
# traffic to the pod is untouched. Loopback destinations are never redirected.
# POSIX sh and iptables only: it runs in any image that has iptables, with
# NET_ADMIN (and nothing else) granted to the container that runs it.
set -eu

uid=${TOOLGATE_UID:-1337}
port=${TOOLGATE_PORT:-15001}
ports=${TOOLGATE_PORTS:-80 443}
chain=${TOOLGATE_CHAIN:-TOOLGATE_OUTPUT}
ipt="iptables -w 5 -t nat"

die() {
	echo "toolgate-iptables: $*" >&2
	exit 1
}

case $uid in '' | *[!0-9]*) die "TOOLGATE_UID must be a number, got '$uid'" ;; esac
case $port in '' | *[!0-9]*) die "TOOLGATE_PORT must be a number, got '$port'" ;; esac
for p in $ports; do
	case $p in *[!0-9]*) die "TOOLGATE_PORTS must be numbers, got '$p'" ;; esac
done

remove() {
	while $ipt -D OUTPUT -p tcp -j "$chain" 2>/dev/null; do :; done
	$ipt -F "$chain" 2>/dev/null || true
	$ipt -X "$chain" 2>/dev/null || true
}

install() {
	remove
	$ipt -N "$chain"
	# toolgate's own connections to upstream leave untouched: without this
	# rule they would loop back into toolgate.
	$ipt -A "$chain" -m owner --uid-owner "$uid" -j RETURN
	$ipt -A "$chain" -d 127.0.0.0/8 -j RETURN
	for p in $ports; do
		$ipt -A "$chain" -p tcp --dport "$p" -j REDIRECT --to-ports "$port"
	done
	$ipt -A OUTPUT -p tcp -j "$chain"
	echo "toolgate-iptables: outbound tcp ports $ports -> 127.0.0.1:$port, except uid $uid and loopback" >&2
}

case ${1:-} in
install) install ;;
remove) remove ;;
show) $ipt -S "$chain" ;;
*) sed -n '2,18s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
esac
