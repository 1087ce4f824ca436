"""Property-based fuzzing of the HTTP API from its own OpenAPI schema (schemathesis), against
the real server fixture: no 5xx, every error is the service's JSON error shape, and 200s match
the declared response schema. Bounded (KWIKI_FUZZ_EXAMPLES, default 100 per operation) for CI."""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("KWIKI_FUZZ_EXAMPLES", "100"))




def _openapi() -> dict:
    """The schema the server publishes at /openapi.json (building the app opens no index)."""
    from kwiki.service.app import create_app
    from kwiki.settings import Settings

    return create_app(Settings(index_dir="/nonexistent")).openapi()


# Loaded at collection so each operation is its own test; the calls go to the real `server` fixture.
schema = schemathesis.openapi.from_dict(_openapi())


def test_published_schema_is_the_fuzzed_one(http):
    assert set(http.get("/openapi.json").json()["paths"]) == set(_openapi()["paths"])


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])
def test_api_never_answers_5xx(case, server):
    response = case.call(base_url=server.url, timeout=60)
    assert response.status_code < 500, f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:300]}"
    if response.status_code >= 400:
        err = response.json()["error"]
        assert isinstance(err["code"], str) and err["message"]
        assert "Traceback" not in response.text
    else:
        case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])
