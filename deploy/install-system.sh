#!/usr/bin/env bash
# System packages the tests need, from Debian: Redis, Java + Maven for the Neo4j launcher, and
# Chromium for the graph explorer's browser test (tests/e2e/test_ui_browser.py).
# Idempotent: installs only what is missing (needs root or sudo the first time).
set -euo pipefail
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
command -v javac >/dev/null || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || missing+=(maven)
command -v chromium >/dev/null || missing+=(chromium)
[[ ${#missing[@]} -eq 0 ]] && exit 0
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO=sudo
echo "installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
