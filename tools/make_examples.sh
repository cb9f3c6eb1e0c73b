#!/usr/bin/env bash
# Writes the example models and their reference outputs (deterministic) with Debian's Python, which has torch.
set -euo pipefail
cd "$(dirname "$0")/.."
/usr/bin/python3 examples/make_models.py
