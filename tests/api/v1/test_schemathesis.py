"""A bounded property-based run of schemathesis against our OpenAPI document, through the WSGI app (real Redis,
the test database): requests that fit the schema and requests that do not, for every operation. Not one may
answer 5xx, nor with a status, content type or body its document does not promise; a request that fits the
schema is not refused (400/422) and one that does not is not accepted (2xx), as schemathesis.toml configures
these two checks. Bounded (EXAMPLES per operation and mode, derandomized) so it takes seconds, not minutes."""

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, given, settings
from schemathesis.config import SchemathesisConfig
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from jobconsole_api.models import ApiToken
from jobconsole_api.v1.openapi import document
from tests.api.v1.conftest import Api

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

EXAMPLES = 10
CONFORMANCE = [status_code_conformance, content_type_conformance, response_schema_conformance,
               positive_data_acceptance, negative_data_rejection]  # fmt: skip
CONFIG = Path(__file__).resolve().parents[3] / "schemathesis.toml"  # the long run's, docs/api.md


def operations() -> list[Any]:
    schema = schemathesis.openapi.from_dict(document(), config=SchemathesisConfig.from_path(CONFIG))
    schema.app = get_wsgi_application()
    return [result.ok() for result in schema.get_all_operations()]


OPERATIONS = operations()


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_server_errors(engine_settings: Any, operator: Api, mode: GenerationMode) -> None:
    # Some jobs, so that reads find rows and actions have something to act on.
    operator.post("/jobs", {"task": "apitest.add", "params": {"a": 1}, "id": "01JCZ4Y1V6Q2J8M3N4P5R6S7T8"})
    operator.post("/jobs", {"task": "apitest.add", "params": {"a": 2}, "delay": 600})
    _, token = ApiToken.objects.issue("schemathesis", "operate")
    failures: list[str] = []
    statuses: Counter[int] = Counter()

    for operation in OPERATIONS:

        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(case=operation.as_strategy(generation_mode=mode))
        def run(case: Any) -> None:
            response = case.call(headers={"Authorization": f"Bearer {token}"})
            statuses[response.status_code] += 1
            if response.status_code >= 500:
                failures.append(f"{response.status_code} for {case.as_curl_command()}: {response.text[:300]}")
            try:  # the answer is one the document promises: a documented status, content type and body
                case.validate_response(response, checks=CONFORMANCE)
            except (AssertionError, BaseExceptionGroup) as exc:  # schemathesis raises a group of its failures
                failures.append(f"{case.as_curl_command()} -> {response.status_code}: {exc}"[:800])

        run()
    assert not failures, "\n".join(failures)
    # The run reached the handlers: successes when the data fits, refusals (not 404s of a wrong base path) when not.
    assert statuses[200] + statuses[201] > (EXAMPLES if mode is GenerationMode.POSITIVE else 0), statuses
    assert sum(n for status, n in statuses.items() if 400 <= status < 500) > 0, statuses
