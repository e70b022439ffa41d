"""A bad RAGSTREAM_* value is one line naming the variable, exit 2, never a traceback
and never the value (a newcomer's find: RAGSTREAM_TRACING=bogus printed 20 lines)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("env, says", [
    ({"RAGSTREAM_TRACING": "bogus"}, "RAGSTREAM_TRACING: Input should be 'off', 'otlp' or 'file'"),
    ({"RAGSTREAM_LOG_FORMAT": "xml"}, "RAGSTREAM_LOG_FORMAT"),
    ({"RAGSTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "RAGSTREAM_KAFKA_SASL_PASSWORD": "hunter2-secret"},
     "needs RAGSTREAM_KAFKA_SASL_USERNAME"),
    ({"RAGSTREAM_TOPIC_MIN_INSYNC_REPLICAS": "2"}, "would refuse every acks=all send"),
])
def test_a_bad_setting_is_one_line_naming_it(env, says):
    out = subprocess.run([sys.executable, "-m", "cli", "topics"], cwd=ROOT, env={**os.environ, **env},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    assert says in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert "hunter2-secret" not in out.stdout + out.stderr
