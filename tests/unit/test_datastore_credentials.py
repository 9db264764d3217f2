"""The Datastore sink's service-account key: from the variable's JSON or a file it
names, validated, and never shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluice_job.sinks.datastore_credentials import ENV, CredentialsError, ServiceAccount

pytestmark = pytest.mark.unit

KEY = {
    "type": "service_account",
    "client_email": "writer@proj.iam.gserviceaccount.com",
    "private_key": "-----BEGIN PRIVATE KEY-----\nSECRET\n-----END PRIVATE KEY-----\n",
    "token_uri": "https://oauth2.googleapis.com/token",
}


def test_unset_means_default_credentials() -> None:
    assert ServiceAccount.from_env({}) is None


def test_json_content_in_the_variable() -> None:
    account = ServiceAccount.from_env({ENV: json.dumps(KEY)})
    assert account is not None
    assert account.email == KEY["client_email"]


def test_a_path_to_a_key_file(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    path.write_text(json.dumps(KEY))
    account = ServiceAccount.from_env({ENV: str(path)})
    assert account is not None
    assert json.loads(account.info) == KEY


def test_the_key_never_shows_in_repr() -> None:
    account = ServiceAccount.from_env({ENV: json.dumps(KEY)})
    assert "SECRET" not in repr(account)
    assert "SECRET" not in str(account)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps({**KEY, "type": "authorized_user"}), "not a service-account key"),
        (json.dumps({k: v for k, v in KEY.items() if k != "private_key"}), "lacks ['private_key']"),
        ("/no/such/key.json", "cannot read the key file"),
    ],
)
def test_bad_credentials_name_the_variable_not_the_secret(value: str, problem: str) -> None:
    with pytest.raises(CredentialsError) as raised:
        ServiceAccount.from_env({ENV: value})
    message = str(raised.value)
    assert message.startswith(ENV)
    assert problem in message
    assert "SECRET" not in message
