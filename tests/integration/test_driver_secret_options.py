"""Transform options from Secrets (``transform.optionsFrom``, issue 14 item 6): the
driver pod gets them as secretKeyRef env vars (``SLUICE_OPTION_<option>``, set here as
the node agent would), the transform receives them like any option, and the value
reaches no log line or termination message."""

from __future__ import annotations

from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import state
from tests.support.driver import Driver, drain_and_stop, spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SECRET = "s3cr\"t-'tag'-\\x"


def test_an_option_from_a_secret_reaches_the_transform_and_no_log(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=1)
    produce(kafka_bootstrap, topic, 20, factory=EventFactory(seed=97))
    body = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=events_table,
    )
    body["transform"]["options"] = {}
    body["transform"]["optionsFrom"] = [{"option": "tag", "secret": "kpis", "key": "tag"}]
    pipeline_id = driver.checkpoint_key

    missing = driver.start(body, epoch=1)
    assert missing.wait(120) == 2
    assert "spec.transform.optionsFrom: option 'tag'" in missing.message()["message"]

    run = driver.start(body, epoch=2, env={"SLUICE_OPTION_tag": SECRET})
    drain_and_stop(run, cassandra, events_table, pipeline_id, {0: 20})
    assert {row.tag for row in state.events(cassandra, events_table).values()} == {SECRET}
    for started in (missing, run):
        assert SECRET not in started.log.read_text(errors="replace")
        if started.termination.exists():
            assert SECRET not in started.termination.read_text()
