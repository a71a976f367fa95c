#!/usr/bin/env bash
# Installs the project's non-Go tools into .cache/ at the repo root. Idempotent: a component
# already installed at the pinned version is left alone, so a second run takes milliseconds.
#
#   scripts/deps.sh              # everything
#   scripts/deps.sh elasticmq    # only what integration tests need
#
# Components (DynamoDB needs none: it is this repository's own, twin/ddb):
#   elasticmq  ElasticMQ server + dependencies, Maven     -> .cache/elasticmq/lib/*.jar
#   cfn-lint   the CloudFormation linter, PyPI            -> .cache/venv/bin/cfn-lint
#   boto3      the AWS SDK for Python, PyPI               -> .cache/venv (for the boto3 conformance check)
#   cdk        the AWS CDK CLI, npm aws-cdk               -> .cache/npm/node_modules/.bin/cdk
set -euo pipefail

ELASTICMQ_VERSION=1.7.1 # org.elasticmq:elasticmq-server_2.13, newest on Maven Central 2026-11
CFN_LINT_VERSION=1.58.0
BOTO3_VERSION=1.44.5
AWS_CDK_VERSION=2.1148.1

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=$root/.cache
mkdir -p "$cache"

say() { printf 'deps: %s\n' "$*"; }
die() { printf 'deps: error: %s\n' "$*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found on PATH; it is needed for $2"; }

# Two make runs in one tree (say, a person and an editor's test runner) must not install at once.
exec 9>"$cache/.deps.lock"
if command -v flock >/dev/null; then flock 9; fi

# npm_version PKG: the version of PKG installed under .cache/npm, or nothing.
npm_version() {
	local pj=$cache/npm/node_modules/$1/package.json
	[[ -f $pj ]] && node -p 'require(process.argv[1]).version' "$pj"
}

npm_install() { # npm_install PKG VERSION WHAT
	need npm "$3"
	say "installing $3 (npm $1@$2) into .cache/npm ..."
	# --save-exact keeps every package pinned in .cache/npm/package.json, so installing one
	# never moves another.
	npm install --prefix "$cache/npm" --save-exact --no-audit --no-fund --loglevel=error "$1@$2" >/dev/null
}

elasticmq() {
	local dir=$cache/elasticmq stamp=$cache/elasticmq/.installed-$ELASTICMQ_VERSION
	if [[ ! -f $stamp ]]; then
		need mvn "ElasticMQ"
		say "installing ElasticMQ $ELASTICMQ_VERSION (Maven org.elasticmq:elasticmq-server_2.13 with its dependencies) into .cache/elasticmq ..."
		rm -rf "$dir"
		mkdir -p "$dir"
		# Maven Central has no all-in-one ElasticMQ jar: resolve the server's runtime closure
		# through a throwaway POM and copy the jars to lib/ (run: java -cp 'lib/*' org.elasticmq.server.Main).
		cat >"$dir/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.fourlanes</groupId>
  <artifactId>elasticmq-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.elasticmq</groupId>
      <artifactId>elasticmq-server_2.13</artifactId>
      <version>$ELASTICMQ_VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
		local out
		if ! out=$(mvn -q -B -f "$dir/pom.xml" dependency:copy-dependencies \
			-DincludeScope=runtime -DoutputDirectory="$dir/lib.tmp" 2>&1); then
			printf '%s\n' "$out" >&2
			die "mvn could not resolve org.elasticmq:elasticmq-server_2.13:$ELASTICMQ_VERSION"
		fi
		mv "$dir/lib.tmp" "$dir/lib"
		touch "$stamp"
	fi
	need java "ElasticMQ"
	say "ElasticMQ ready: .cache/elasticmq/lib/ ($(ls "$dir/lib" | wc -l) jars)"
}

cfn_lint() {
	local venv=$cache/venv stamp=$cache/venv/.installed-cfn-lint-$CFN_LINT_VERSION
	if [[ ! -f $stamp ]]; then
		need python3 "cfn-lint"
		say "installing cfn-lint $CFN_LINT_VERSION (PyPI) into .cache/venv ..."
		rm -rf "$venv"
		python3 -m venv "$venv"
		"$venv/bin/pip" install --quiet --disable-pip-version-check "cfn-lint==$CFN_LINT_VERSION"
		touch "$stamp"
	fi
	say "cfn-lint ready: .cache/venv/bin/cfn-lint"
}

# boto3 shares cfn-lint's venv. Its stamp lives inside the venv, so when cfn-lint builds the
# venv afresh, boto3 is installed again on its next call.
boto3() {
	local venv=$cache/venv stamp=$cache/venv/.installed-boto3-$BOTO3_VERSION
	if [[ ! -f $stamp ]]; then
		need python3 "boto3"
		if [[ ! -x $venv/bin/pip ]]; then
			python3 -m venv "$venv"
		fi
		say "installing boto3 $BOTO3_VERSION (PyPI) into .cache/venv ..."
		"$venv/bin/pip" install --quiet --disable-pip-version-check "boto3==$BOTO3_VERSION"
		rm -f "$venv"/.installed-boto3-*
		touch "$stamp"
	fi
	say "boto3 ready: .cache/venv/bin/python3 -c 'import boto3'"
}

cdk() {
	if [[ $(npm_version aws-cdk) != "$AWS_CDK_VERSION" ]]; then
		npm_install aws-cdk "$AWS_CDK_VERSION" "the AWS CDK CLI"
	fi
	[[ -x $cache/npm/node_modules/.bin/cdk ]] || die "aws-cdk@$AWS_CDK_VERSION installed but no .cache/npm/node_modules/.bin/cdk"
	say "CDK CLI ready: .cache/npm/node_modules/.bin/cdk"
}

(($# > 0)) || set -- elasticmq cfn-lint boto3 cdk
for component in "$@"; do
	case $component in
	elasticmq) elasticmq ;;
	cfn-lint) cfn_lint ;;
	boto3) boto3 ;;
	cdk) cdk ;;
	*) die "unknown component '$component' (want: elasticmq cfn-lint boto3 cdk)" ;;
	esac
done
