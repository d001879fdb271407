"""A bounded schemathesis run over the API's OpenAPI schema: no input, valid or not, gets a server error.

Every operation gets generated requests (positive and negative) through the WSGI app with an admin key, against
a database holding a session, a reported run with its archive and summary, and a drift case, so that the ids
and keys the fuzzer tries sometimes exist. Tasks are not sent (the test transaction never commits).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from schemathesis.checks import not_a_server_error

from console.api import api
from console.wsgi import application
from tests.console.test_api import issue_key
from tests.console.test_api_input import world  # noqa: F401 (fixture)

schema = schemathesis.openapi.from_dict(api.get_openapi_schema())
schema.app = application
#: examples per operation: 19 operations, the whole run about 35 s on a shared 2-core machine
EXAMPLES = 25
#: path parameter -> the fixture's object it names
EXISTING = {"archive_id": "archive", "summary_id": "summary", "case_id": "case", "run_id": "run"}


@pytest.fixture
def admin(db, world, settings) -> Iterator[tuple[str, dict[str, Any]]]:  # noqa: F811
    settings.API_RATE_LIMIT = ""  # the fuzzer sends hundreds of requests a second
    settings.COMPRESS_WAIT_MAX_SECONDS = 0  # a generated wait must not hold the test
    # as Django's test client does: the end of a request must not close the test's database connection
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield issue_key("fuzzer", "admin"), world
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@schema.parametrize()
@hypothesis_settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_request_gets_a_server_error(case, admin):
    key, objects = admin
    # half the generated ids and keys are swapped for ones that exist, so requests get past the lookup
    for name, value in (case.path_parameters or {}).items():
        if name in EXISTING and isinstance(value, int) and value % 2 == 0:
            case.path_parameters[name] = objects[EXISTING[name]]
        elif name == "key" and isinstance(value, str) and len(value) % 2 == 0:
            case.path_parameters[name] = "w:1"
    response = case.call(headers={"Authorization": f"Bearer {key}"})
    case.validate_response(response, checks=[not_a_server_error])
