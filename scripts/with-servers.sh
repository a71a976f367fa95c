#!/usr/bin/env bash
# Runs a command with one fresh in-memory DynamoDB (the project's own, `fourlanes dynamodb`)
# and one ElasticMQ on free loopback ports, and stops both when the command ends, however it ends.
#
#   scripts/with-servers.sh go test ./...
#
# The command sees FOURLANES_DYNAMODB_ENDPOINT and FOURLANES_SQS_ENDPOINT (the DynamoDB
# endpoint serves DynamoDB Streams too), which the tests' localaws helpers use instead of
# starting servers of their own, FOURLANES_DYNAMODB_BIN (the fourlanes binary, for a test that
# needs a DynamoDB of its own) and FOURLANES_ELASTICMQ (ElasticMQ's jars). Server output goes
# to a temporary folder, shown on failure.
set -euo pipefail

# Concurrent transactions on one item fail with TransactionConflict, as on AWS, instead of
# queueing. Set to false if that makes unrelated tests flaky.
DYNAMODB_CONFLICTS=true

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
(($# > 0)) || { echo "usage: $0 command [args...]" >&2; exit 2; }

bash "$root/scripts/deps.sh" elasticmq >/dev/null
# The DynamoDB is this repository's own code: build it from this tree (seconds when cached).
fourlanes=$root/.cache/bin/fourlanes
(cd "$root" && "${GO:-go}" build -o "$fourlanes" ./cmd/fourlanes)
ddb_flags=()
if [[ $DYNAMODB_CONFLICTS == true ]]; then ddb_flags+=(-conflicts); fi

work=$(mktemp -d "${TMPDIR:-/tmp}/fourlanes-servers.XXXXXX")
pids=()
stop_servers() {
	local rc=$?
	for pid in "${pids[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true # in memory: nothing to flush
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$work"
	exit "$rc"
}
trap stop_servers EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Same configuration as localaws.ElasticMQConfig: loopback, queue URLs and ARNs like AWS's.
elasticmq_conf() {
	cat <<EOF
include classpath("application.conf")
node-address { protocol = "http", host = "127.0.0.1", port = $1, context-path = "" }
rest-sqs { enabled = true, bind-hostname = "127.0.0.1", bind-port = $1, sqs-limits = strict }
aws { region = "us-east-1", accountId = "000000000000" }
EOF
}

declare -A pid_of endpoint_of log_of
# The servers get SIGKILL when this script dies, even by SIGKILL, where setpriv can arrange it.
reaper=()
if setpriv --pdeathsig KILL true 2>/dev/null; then reaper=(setpriv --pdeathsig KILL); fi

# launch NAME: starts server NAME on a free port, in the background.
launch() {
	local name=$1 port cmd
	case $name in
	dynamodb)
		# Port 0: the server picks a free port and prints its endpoint first (see await).
		port=0
		cmd=("$fourlanes" dynamodb -listen 127.0.0.1:0 "${ddb_flags[@]}") ;;
	elasticmq)
		port=$(free_port)
		elasticmq_conf "$port" >"$work/elasticmq-$port.conf"
		cmd=(java -Dconfig.file="$work/elasticmq-$port.conf" -cp "$root/.cache/elasticmq/lib/*" org.elasticmq.server.Main) ;;
	esac
	log_of[$name]=$work/$name-$RANDOM.log
	(cd "$work" && exec "${reaper[@]}" "${cmd[@]}") >"${log_of[$name]}" 2>&1 &
	pid_of[$name]=$!
	pids+=("$!")
	endpoint_of[$name]=http://127.0.0.1:$port
}

# answers URL TARGET: true once the server at URL answers the JSON-protocol call TARGET with 200.
answers() {
	[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 -X POST \
		-H 'Content-Type: application/x-amz-json-1.0' -H "X-Amz-Target: $2" \
		-H 'Authorization: AWS4-HMAC-SHA256 Credential=fourlanes/20260101/us-east-1/local/aws4_request, SignedHeaders=host, Signature=0' \
		-d '{}' "$1") == 200 ]]
}

# await NAME TARGET: waits until server NAME answers TARGET. A server that dies at start-up
# is launched again on a new port (the port can be taken between probe and bind), twice at most.
await() {
	local name=$1 target=$2 attempt deadline
	for attempt in 1 2 3; do
		deadline=$((SECONDS + 90))
		while kill -0 "${pid_of[$name]}" 2>/dev/null; do
			if [[ ${endpoint_of[$name]} == *:0 ]]; then
				# Not yet known: the server prints "http://127.0.0.1:PORT ..." once it listens.
				endpoint_of[$name]=$(grep -o -m1 '^http://127\.0\.0\.1:[0-9]*' "${log_of[$name]}" || echo "${endpoint_of[$name]}")
			fi
			[[ ${endpoint_of[$name]} != *:0 ]] && answers "${endpoint_of[$name]}" "$target" && return 0
			if ((SECONDS > deadline)); then
				echo "with-servers: $name on ${endpoint_of[$name]} did not answer within 90s; its output:" >&2
				tail -n 40 "${log_of[$name]}" >&2
				exit 1
			fi
			sleep 0.1 # poll interval, bounded by the deadline above
		done
		echo "with-servers: $name exited during start-up (attempt $attempt); its output:" >&2
		tail -n 40 "${log_of[$name]}" >&2
		if ((attempt < 3)); then launch "$name"; fi
	done
	exit 1
}

began=$(date +%s%3N)
launch dynamodb
launch elasticmq
await dynamodb DynamoDB_20120810.ListTables
await elasticmq AmazonSQS.ListQueues
export FOURLANES_DYNAMODB_ENDPOINT=${endpoint_of[dynamodb]} FOURLANES_SQS_ENDPOINT=${endpoint_of[elasticmq]}
# Tests that need a DynamoDB of their own (its options, its clock) start this binary's.
export FOURLANES_DYNAMODB_BIN=$fourlanes
# The twin's ElasticMQ, for tests and commands that start one of their own.
export FOURLANES_ELASTICMQ=$root/.cache/elasticmq/lib
echo "with-servers: DynamoDB (fourlanes dynamodb ${ddb_flags[*]}) on $FOURLANES_DYNAMODB_ENDPOINT and ElasticMQ on $FOURLANES_SQS_ENDPOINT, up in $(($(date +%s%3N) - began)) ms" >&2

set +e
"$@"
