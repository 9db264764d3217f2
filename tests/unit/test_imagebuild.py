"""``sluice-dev image build``: image names, where builds live, which builds go, and the
errors a user sees before anything is installed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sluice_dev import cli
from sluice_dev.imagebuild import (
    ImageBuildError,
    ImageRef,
    build_id,
    build_root,
    image_env_text,
    install_failure,
    parse_reference,
    stale_builds,
    top_level_modules,
)
from sluice_dev.nodeagent.podspec import read_image_env
from sluice_dev.paths import Layout

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("clickscore:0.1.0", ImageRef("clickscore", "0.1.0")),
        ("clickscore", ImageRef("clickscore", "latest")),
        ("sluice-e2e/clickscore:test", ImageRef("sluice-e2e/clickscore", "test")),
        ("registry:5000/team/app_x:1.2-rc_1", ImageRef("registry:5000/team/app_x", "1.2-rc_1")),
    ],
)
def test_a_reference_is_a_name_and_a_tag(text: str, ref: ImageRef) -> None:
    assert parse_reference(text) == ref


@pytest.mark.parametrize(
    "text",
    [
        "",
        ":1",
        "Click:1",
        "app:",
        "app:bad tag",
        "app:-x",
        "app@sha256:abc",
        "a//b:1",
        "a:" + "x" * 129,
    ],
)
def test_anything_else_is_refused_naming_the_flag(text: str) -> None:
    with pytest.raises(ImageBuildError, match="--tag"):
        parse_reference(text)


def test_builds_live_under_the_stack_without_a_colon_in_their_path(tmp_path: Path) -> None:
    layout = Layout(cache=tmp_path / "cache", stack=tmp_path / "stack")
    root = build_root(layout, parse_reference("registry:5000/team/app:1.2"))
    assert root == tmp_path / "stack" / "images" / "registry_5000" / "team" / "app" / "1.2"


def test_build_ids_sort_in_time_order_and_the_two_newest_builds_stay() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    ids = [build_id(now + timedelta(microseconds=n), "zzzzzz"[: 6 - n] + "a" * n) for n in range(4)]
    assert sorted(ids) == ids
    assert stale_builds([ids[2], ".staging.tmp", ids[0], ids[3], ids[1]]) == ids[:2]
    assert stale_builds(ids[:2]) == []


def test_the_image_env_gives_the_driver_the_jars_and_the_class_archive_of_the_stack(
    tmp_path: Path,
) -> None:
    env = {
        "SLUICE_SPARK_JARS": f"{tmp_path / 'a.jar'},{tmp_path / 'b.jar'}",
        "SLUICE_SPARK_CLASS_ARCHIVE": str(tmp_path / "spark.jsa"),
    }
    (tmp_path / "image.env").write_text(image_env_text(env))
    assert read_image_env(tmp_path / "image.env") == env


def test_the_modules_of_a_target_directory_are_its_packages_and_modules(tmp_path: Path) -> None:
    for name in ("pkg", "pkg-1.0.dist-info", "bin", "__pycache__"):
        (tmp_path / name).mkdir()
    for name in ("single.py", "image.env", "README"):
        (tmp_path / name).write_text("")
    assert top_level_modules(tmp_path) == ("pkg", "single")


def test_a_directory_without_pyproject_is_refused_before_anything_is_registered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLUICE_STACK_DIR", str(tmp_path / "stack"))
    assert cli.main(["image", "build", str(tmp_path), "--tag", "mine:1"]) == 1
    assert "has no pyproject.toml" in capsys.readouterr().err
    assert not (tmp_path / "stack").exists()


def test_a_bad_tag_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLUICE_STACK_DIR", str(tmp_path / "stack"))
    (tmp_path / "pyproject.toml").write_text("")
    assert cli.main(["image", "build", str(tmp_path), "--tag", "Mine:1"]) == 1
    assert "--tag 'Mine:1' is not an image name" in capsys.readouterr().err


def test_a_manifest_is_pointed_at_the_local_stack_keeping_its_image_and_transform() -> None:
    import yaml

    from sluice_dev.localrun import cql_statements, localized, topics
    from sluice_dev.paths import REPO_ROOT

    example = REPO_ROOT / "examples" / "custom-transform"
    manifest = yaml.safe_load((example / "pipeline.yaml").read_text())
    body = localized(
        manifest, namespace="sluice-demo", bootstrap="k:1", contact="c:2", pubsub="p:3"
    )
    spec = body["spec"]
    assert body["metadata"] == {"name": "click-scores", "namespace": "sluice-demo"}
    assert spec["source"]["kafka"]["bootstrapServers"] == "k:1"
    assert spec["sink"]["cassandra"]["contactPoints"] == ["c:2"]
    assert spec["checkpoint"]["cassandra"]["contactPoints"] == ["c:2"]
    assert (spec["image"], spec["transform"]) == (
        manifest["spec"]["image"],
        manifest["spec"]["transform"],
    )
    assert manifest["spec"]["source"]["kafka"]["bootstrapServers"] != "k:1", "a copy"
    assert topics(spec) == (["clicks"], "clicks-dlq")
    statements = cql_statements((example / "schema.cql").read_text())
    assert [s.split("(")[0].split()[:2] for s in statements] == [
        ["CREATE", "KEYSPACE"],
        ["CREATE", "TABLE"],
    ]


def test_a_build_backend_without_a_pinned_hash_says_where_to_pin_it() -> None:
    tail = "error: Hash-checking is required, but no trusted hash was provided for: `flit-core`"
    message = install_failure(Path("/src/pkg"), 2, tail)
    assert "not pinned by hash in build-constraints.txt" in message
    assert "make constraints" in message
    assert "`flit-core`" in message
    assert install_failure(Path("/src/pkg"), 1, "boom").startswith("uv could not install /src/pkg")
