"""A bounded schemathesis run against the app's own OpenAPI schema: whatever shape a caller
sends, the answer is never a 5xx and always matches the documented status codes and bodies.

Skipped where schemathesis is not installed (it is an optional dev tool, not a dependency).
The "valid by schema must be accepted" check is left out on purpose: the schema cannot express
the cross-field rules (unique names, known pools, GPU indices in range), so requests that are
schema-valid yet rejected with a precise 422 are correct behaviour, not failures.
"""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")

from conftest import settings  # noqa: E402
from hypothesis import HealthCheck  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402
from placement_service.app import create_app  # noqa: E402
from schemathesis.checks import positive_data_acceptance  # noqa: E402

APP = create_app(settings(max_time_limit_s=0.3, max_nodes=20, max_jobs=20, max_body_bytes=64 * 1024,
                          api_token="fuzz"))
SCHEMA = schemathesis.openapi.from_asgi("/openapi.json", APP)
# Fuzzing only: the coverage phase enumerates boundary cases of every nested request field,
# which takes minutes on this schema; random fuzzing keeps the run bounded.
SCHEMA.config.phases.coverage.enabled = False
# A body over the size limit is refused (413) before it is validated; that is a rejection too.
# What-if bodies (a request plus scenarios) reach the fuzz limit often. A new list: the default is shared.
_rejection = SCHEMA.config.checks.negative_data_rejection
_rejection.expected_statuses = [*_rejection.expected_statuses, "413"]


@SCHEMA.parametrize()
@hypothesis_settings(max_examples=8, deadline=None, derandomize=True,
                     suppress_health_check=list(HealthCheck))
def test_any_input_gets_a_documented_non_5xx_answer(case: schemathesis.Case) -> None:
    case.call_and_validate(headers={"Authorization": "Bearer fuzz"}, excluded_checks=[positive_data_acceptance])
