#!/usr/bin/env bash
# clickhouse.sh — private ClickHouse servers for toolgate's tests.
#
#   scripts/clickhouse.sh install
#       Installs clickhouse-server and clickhouse-client with apt-get (Debian's
#       package, 18.16 on bookworm) when either is missing. `make test` runs it.
#   scripts/clickhouse.sh start DIR [TCP_PORT [HTTP_PORT]]
#       Writes a config into DIR, starts a private server in the background
#       (pid in DIR/pid, logs in DIR/log/), waits until it answers a query
#       (60 s at most) and prints its native address, 127.0.0.1:TCP_PORT.
#       Free ports are chosen when not given.
#   scripts/clickhouse.sh stop DIR
#       Stops the server started in DIR: SIGTERM, then SIGKILL after 10 s.
#   scripts/clickhouse.sh config DIR TCP_PORT HTTP_PORT
#       Only writes DIR/config.xml and DIR/users.xml. internal/chtest calls this
#       and starts clickhouse-server itself, so the XML lives here only.
#   scripts/clickhouse.sh cluster-config DIR ZK_PORT INTERSERVER_PORT SHARD REPLICA TCP_PORT...
#       Writes DIR/config.d/cluster.xml for a server of a test cluster: the
#       private ZooKeeper on 127.0.0.1:ZK_PORT, the port replicas fetch parts
#       from, the macros {shard} and {replica}, distributed DDL, and two
#       clusters over the servers listening
#       on the given TCP ports: toolgate_shards (one shard per server) and
#       toolgate_replicas (one shard, every server a replica of it).
#   scripts/clickhouse.sh zookeeper-config DIR ZK_PORT
#       Writes DIR/zoo.cfg for a private standalone ZooKeeper (Debian's
#       zookeeper package) with its data in DIR/data, listening on
#       127.0.0.1:ZK_PORT. internal/chtest starts it.
#
# A private server never touches the system service, /var/lib/clickhouse or the
# default ports: everything it owns is under DIR, and it listens on 127.0.0.1.
set -euo pipefail

readonly START_TIMEOUT=60 # seconds to wait for the first answer
readonly STOP_TIMEOUT=10  # seconds between SIGTERM and SIGKILL

die() {
	echo "clickhouse.sh: $*" >&2
	exit 1
}

usage() {
	sed -n '2,28s/^# \{0,1\}//p' "$0" >&2
	exit 2
}

# server_bin prints the path of clickhouse-server; Debian puts it in /usr/sbin,
# which is not on every user's PATH.
server_bin() {
	command -v clickhouse-server 2>/dev/null && return 0
	[[ -x /usr/sbin/clickhouse-server ]] && echo /usr/sbin/clickhouse-server && return 0
	return 1
}

client_bin() {
	command -v clickhouse-client 2>/dev/null && return 0
	[[ -x /usr/bin/clickhouse-client ]] && echo /usr/bin/clickhouse-client && return 0
	return 1
}

# run prints a command, then runs it.
run() {
	echo "+ $*" >&2
	"$@"
}

cmd_install() {
	local missing=()
	server_bin >/dev/null || missing+=(clickhouse-server)
	client_bin >/dev/null || missing+=(clickhouse-client)
	if ((${#missing[@]} == 0)); then
		echo "clickhouse.sh: clickhouse-server and clickhouse-client are installed ($(server_bin))" >&2
		return 0
	fi
	echo "clickhouse.sh: installing ${missing[*]} with apt-get" >&2
	command -v apt-get >/dev/null ||
		die "cannot install ${missing[*]}: apt-get not found. This script installs Debian's package; on other systems install ClickHouse so that clickhouse-server is on PATH."
	local sudo=()
	if ((EUID != 0)); then
		command -v sudo >/dev/null ||
			die "cannot install ${missing[*]}: not running as root and sudo not found. Run: apt-get install -y clickhouse-server clickhouse-client (as root)"
		sudo=(sudo)
	fi
	run "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q ||
		die "apt-get update failed (exit $?); see its output above"
	run "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" ||
		die "apt-get install ${missing[*]} failed (exit $?); see its output above"
	server_bin >/dev/null ||
		die "apt-get finished but clickhouse-server is still not found (looked on PATH and in /usr/sbin)"
	echo "clickhouse.sh: installed $(server_bin)" >&2
}

# xml_escape prints $1 escaped for XML text. The replacements are quoted so
# bash 5.2's patsub_replacement does not read '&' as "the matched text".
xml_escape() {
	local s=$1
	s=${s//&/"&amp;"}
	s=${s//</"&lt;"}
	s=${s//>/"&gt;"}
	printf '%s' "$s"
}

# abs_dir creates directory $1 and prints its absolute, symlink-free path.
abs_dir() {
	mkdir -p "$1" || die "cannot create $1"
	(cd "$1" && pwd -P)
}

check_port() {
	[[ $1 =~ ^[1-9][0-9]*$ ]] && (($1 > 0 && $1 < 65536)) || die "bad port: $1"
}

# write_config DIR TCP HTTP writes DIR/config.xml and DIR/users.xml. This is the
# one place the test servers' XML is defined (internal/chtest calls `config`).
write_config() {
	local dir tcp=$2 http=$3 x
	dir=$(abs_dir "$1")
	check_port "$tcp"
	check_port "$http"
	[[ $tcp != "$http" ]] || die "TCP and HTTP ports must differ (both $tcp)"
	mkdir -p "$dir/data" "$dir/tmp" "$dir/log" "$dir/user_files" "$dir/format_schemas"
	x=$(xml_escape "$dir")
	cat >"$dir/config.xml" <<EOF
<?xml version="1.0"?>
<!-- Written by scripts/clickhouse.sh: a private test server. -->
<yandex>
    <logger>
        <level>warning</level>
        <log>$x/log/server.log</log>
        <errorlog>$x/log/error.log</errorlog>
        <console>0</console>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>$tcp</tcp_port>
    <http_port>$http</http_port>
    <path>$x/data/</path>
    <tmp_path>$x/tmp/</tmp_path>
    <user_files_path>$x/user_files/</user_files_path>
    <format_schema_path>$x/format_schemas/</format_schema_path>
    <users_config>$x/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mark_cache_size>5368709120</mark_cache_size>
</yandex>
EOF
	cat >"$dir/users.xml" <<'EOF'
<?xml version="1.0"?>
<!-- Written by scripts/clickhouse.sh: a private test server. -->
<yandex>
    <profiles>
        <default>
            <max_memory_usage>2000000000</max_memory_usage>
            <!-- Idle connections look for a shutdown every poll_interval seconds
                 (default 10): 1 lets a graceful stop finish in about a second. -->
            <poll_interval>1</poll_interval>
        </default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks>
                <ip>127.0.0.1</ip>
                <ip>::1</ip>
            </networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries>
                <errors>0</errors>
                <result_rows>0</result_rows>
                <read_rows>0</read_rows>
                <execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
EOF
}

cmd_config() {
	(($# == 3)) || usage
	write_config "$1" "$2" "$3"
}

# port_in_use PORT succeeds when something accepts connections on 127.0.0.1:PORT.
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# free_port prints a port in 20000-32767 (below Linux's ephemeral range) that
# nothing listens on and that differs from $1. A race with another process is
# possible; start then fails loudly with the bind error from the server's log.
free_port() {
	local p i
	for ((i = 0; i < 100; i++)); do
		p=$((20000 + RANDOM % 12768))
		[[ $p != "${1:-}" ]] && ! port_in_use "$p" && echo "$p" && return 0
	done
	die "no free port found"
}

# running_pid DIR prints the pid of the server started in DIR, if it still runs.
# The process's command line must name DIR/config.xml, so a recycled pid is
# never signalled.
running_pid() {
	local dir=$1 pid
	[[ -f $dir/pid ]] || return 1
	pid=$(<"$dir/pid")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	[[ -r /proc/$pid/cmdline ]] || { kill -0 "$pid" 2>/dev/null || return 1; echo "$pid"; return 0; }
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "--config-file=$dir/config.xml" || return 1
	echo "$pid"
}

error_tail() {
	local dir=$1 f
	for f in "$dir/log/error.log" "$dir/log/stdout.log"; do
		[[ -s $f ]] || continue
		echo "--- tail of $f:" >&2
		tail -n 30 "$f" >&2
	done
}

# IDENTITY_QUERY returns the data path of the server that answers it; start
# compares it with DIR, so a server that failed to bind is never mistaken for
# another one that already listens on the same port.
readonly IDENTITY_QUERY="SELECT data_path FROM system.databases WHERE name = 'default'"

# answers DIR TCP HTTP succeeds when the server started from DIR answers.
answers() {
	local dir=$1 tcp=$2 http=$3 client out
	if client=$(client_bin); then
		out=$("$client" --host 127.0.0.1 --port "$tcp" --query "$IDENTITY_QUERY" 2>/dev/null) || return 1
	elif command -v curl >/dev/null; then
		out=$(curl -fsS --max-time 2 --data-binary "$IDENTITY_QUERY" "http://127.0.0.1:$http/" 2>/dev/null) || return 1
	else
		die "neither clickhouse-client nor curl found to check the server; run: scripts/clickhouse.sh install"
	fi
	[[ $out == "$dir/data/data/default/" ]]
}

cmd_start() {
	(($# >= 1 && $# <= 3)) || usage
	local dir tcp http bin pid i
	dir=$(abs_dir "$1")
	bin=$(server_bin) || die "clickhouse-server not found; run: scripts/clickhouse.sh install"
	if pid=$(running_pid "$dir"); then
		die "a server from $dir already runs (pid $pid); stop it with: scripts/clickhouse.sh stop $dir"
	fi
	tcp=${2:-$(free_port)}
	http=${3:-$(free_port "$tcp")}
	check_port "$tcp"
	check_port "$http"
	port_in_use "$tcp" && die "port $tcp is in use"
	port_in_use "$http" && die "port $http is in use"
	write_config "$dir" "$tcp" "$http"
	: >"$dir/log/error.log"
	nohup "$bin" --config-file="$dir/config.xml" >>"$dir/log/stdout.log" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$dir/pid"
	for ((i = 0; i < START_TIMEOUT * 5; i++)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			rm -f "$dir/pid"
			error_tail "$dir"
			die "clickhouse-server exited during start (ports $tcp, $http; dir $dir)"
		fi
		if answers "$dir" "$tcp" "$http"; then
			echo "127.0.0.1:$tcp"
			return 0
		fi
		sleep 0.2
	done
	error_tail "$dir"
	kill -KILL "$pid" 2>/dev/null || true
	rm -f "$dir/pid"
	die "clickhouse-server did not answer a query within ${START_TIMEOUT}s (ports $tcp, $http; dir $dir); killed it"
}

cmd_stop() {
	(($# == 1)) || usage
	local dir pid i
	[[ -d $1 ]] || die "no such directory: $1"
	dir=$(cd "$1" && pwd -P)
	if ! pid=$(running_pid "$dir"); then
		rm -f "$dir/pid"
		echo "clickhouse.sh: no server runs from $dir" >&2
		return 0
	fi
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "clickhouse.sh: pid $pid ignored SIGTERM for ${STOP_TIMEOUT}s; sending SIGKILL" >&2
		kill -KILL "$pid" 2>/dev/null || true
		while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
	fi
	rm -f "$dir/pid"
	echo "clickhouse.sh: stopped pid $pid ($dir)" >&2
}

# write_cluster_config DIR ZK_PORT INTERSERVER_PORT SHARD REPLICA TCP_PORT... writes
# DIR/config.d/cluster.xml (clickhouse-server reads config.d/*.xml beside
# its config.xml).
write_cluster_config() {
	local dir zk=$2 inter=$3 shard=$4 replica=$5 p
	dir=$(abs_dir "$1")
	shift 5
	check_port "$zk"
	check_port "$inter"
	(($# >= 1)) || die "cluster-config needs the TCP port of every server"
	[[ $shard =~ ^[A-Za-z0-9_-]+$ && $replica =~ ^[A-Za-z0-9_-]+$ ]] || die "bad shard or replica name: $shard $replica"
	mkdir -p "$dir/config.d"
	{
		cat <<EOF
<?xml version="1.0"?>
<!-- Written by scripts/clickhouse.sh: a server of a private test cluster. -->
<yandex>
    <!-- debug: internal/chtest waits for "DDLWorker: Processing tasks" (18.16
         crashes on an ON CLUSTER query its DDL worker gets before it has
         reached ZooKeeper). -->
    <logger><level>debug</level></logger>
    <zookeeper>
        <node><host>127.0.0.1</host><port>$zk</port></node>
        <session_timeout_ms>10000</session_timeout_ms>
        <operation_timeout_ms>5000</operation_timeout_ms>
    </zookeeper>
    <interserver_http_host>127.0.0.1</interserver_http_host>
    <interserver_http_port>$inter</interserver_http_port>
    <macros>
        <shard>$shard</shard>
        <replica>$replica</replica>
    </macros>
    <distributed_ddl>
        <path>/clickhouse/task_queue/ddl</path>
    </distributed_ddl>
    <!-- A replica restarted right after a kill finds its old ZooKeeper
         session still alive ("appears to be already active") and retries
         after this many seconds (60 by default). -->
    <merge_tree>
        <zookeeper_session_expiration_check_period>5</zookeeper_session_expiration_check_period>
    </merge_tree>
    <remote_servers>
        <toolgate_shards>
EOF
		for p in "$@"; do
			check_port "$p"
			printf '            <shard><internal_replication>true</internal_replication><replica><host>127.0.0.1</host><port>%s</port></replica></shard>\n' "$p"
		done
		cat <<EOF
        </toolgate_shards>
        <toolgate_replicas>
            <shard>
                <internal_replication>true</internal_replication>
EOF
		for p in "$@"; do
			printf '                <replica><host>127.0.0.1</host><port>%s</port></replica>\n' "$p"
		done
		cat <<EOF
            </shard>
        </toolgate_replicas>
    </remote_servers>
</yandex>
EOF
	} >"$dir/config.d/cluster.xml"
}

cmd_cluster_config() {
	(($# >= 6)) || usage
	write_cluster_config "$@"
}

# write_zookeeper_config DIR ZK_PORT writes DIR/zoo.cfg for a standalone
# ZooKeeper: short ticks (sessions of 1-20 s, so a restart is noticed
# quickly), no admin server, only the srvr four-letter word (the readiness
# check), and no fsync of its log: a test ZooKeeper is stopped or killed,
# never loses power, and on a busy disk each fsync stalls every ON CLUSTER
# statement and replicated insert behind it.
write_zookeeper_config() {
	local dir zk=$2
	dir=$(abs_dir "$1")
	check_port "$zk"
	mkdir -p "$dir/data" "$dir/log"
	cat >"$dir/zoo.cfg" <<EOF
# Written by scripts/clickhouse.sh: a private test ZooKeeper.
tickTime=500
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=$zk
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr
maxClientCnxns=200
forceSync=no
minSessionTimeout=1000
maxSessionTimeout=20000
EOF
}

cmd_zookeeper_config() {
	(($# == 2)) || usage
	write_zookeeper_config "$1" "$2"
}

main() {
	(($# >= 1)) || usage
	local cmd=$1
	shift
	case $cmd in
	install) cmd_install "$@" ;;
	start) cmd_start "$@" ;;
	stop) cmd_stop "$@" ;;
	config) cmd_config "$@" ;;
	cluster-config) cmd_cluster_config "$@" ;;
	zookeeper-config) cmd_zookeeper_config "$@" ;;
	-h | --help | help) usage ;;
	*) usage ;;
	esac
}

main "$@"
