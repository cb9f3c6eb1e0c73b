#!/usr/bin/env bash
# Builds a release build, writes the example repository and serves it: HTTP on 8000, metrics on 8002.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh release
bash tools/make_examples.sh
exec build/release/src/app/weft serve --model-repository examples/models --http-port 8000 --metrics-port 8002 "$@"
