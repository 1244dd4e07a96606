#!/usr/bin/env bash
# Builds the Java Sentinel clients driver (Jedis, Lettuce, Redisson, Spring
# Data Redis) with Maven into one runnable jar and prints its absolute path
# on the last line of stdout:
#   java -jar <path> <sentinel-ports> <clients>
# Dependencies come from Maven Central into the default local repository
# (~/.m2/repository), so a second build needs no network.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
jar="$here/target/valkyrie-java-clients.jar"
# Rebuild only when a source, the pom or this script is newer than the jar.
if [[ ! -f "$jar" || -n "$(find pom.xml build.sh src -newer "$jar" -print -quit)" ]]; then
  # Offline first: fast, and enough once ~/.m2 holds everything.
  if ! mvn -B -q -o package >/dev/null 2>&1; then
    mvn -B -q package >&2
  fi
fi
echo "$jar"
