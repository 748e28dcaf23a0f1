#!/usr/bin/env bash
# Telemetry through the real binary (test_telemetry.py): each front end runs a turn with a
# caller's trace context against an OTLP/HTTP receiver built on the official protobuf
# definitions (opentelemetry-proto from PyPI, pinned in requirements.txt), and Debian's
# prometheus scrapes `/metrics` (installed by scripts/prometheus when missing). Needs the
# debug binaries `interpreter` and `mock-model`; builds them unless INTERPRETER_BIN_DIR is
# set.
set -euo pipefail
cd "$(dirname "$0")"
if [[ -z "${INTERPRETER_BIN_DIR:-}" ]]; then
  (cd ../.. && cargo build -p interpreter-cli -p interpreter-test-support --bins)
fi
if [[ -z "${PROMETHEUS:-}" ]]; then
  PROMETHEUS="$(../../scripts/prometheus ensure)"
  export PROMETHEUS
fi
[[ -x .venv/bin/python ]] || python3 -m venv .venv
.venv/bin/pip install -q -r requirements.txt
timeout 900 .venv/bin/python test_telemetry.py "$@"
