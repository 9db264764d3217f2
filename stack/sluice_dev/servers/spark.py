"""Spark's Kafka source for the pip-installed PySpark: no server, one artifact.

The driver reads exact Kafka offset ranges with ``spark.read.format("kafka")``,
which lives in ``spark-sql-kafka-0-10``, a module PySpark does not ship. The
artifact copies it and the few dependencies PySpark lacks (its token provider,
``kafka-clients``, ``commons-pool2``) from Maven Central; :func:`spark_jars` lists
them for ``spark.jars``, which must be set before the session's JVM starts.

Every jar PySpark already has in ``pyspark/jars`` is left out (the pom excludes
them, and the build drops any that slip through), so a session never loads two
versions of one library.

Maven Central has no ``spark-token-provider-kafka-0-10`` for Spark 4.2.0; the pom
substitutes the 4.0.0 jar and says why that is safe for non-Kerberos use.

A second artifact, ``spark-class-archive``, is the drivers' class data sharing archive
(``sluice_job.class_archive``), made with this interpreter's PySpark and the JDK its
drivers launch; :func:`job_image_env` gives both to the job images of the node agent,
as ``Dockerfile.job``'s ``ENV`` gives them to the real image.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Final

from sluice_api import env as env_names
from sluice_dev import versions
from sluice_dev.artifacts import Artifact
from sluice_dev.build import STACK_SRC, BuildError, maven_copy, run
from sluice_dev.paths import REPO_ROOT, Layout
from sluice_dev.servers.base import Server

NAME: Final = "spark-kafka"
POM: Final = STACK_SRC / "maven" / "spark-kafka" / "pom.xml"
# spark-sql-kafka is published for Scala 2.13 only since Spark 4.
SCALA_BINARY: Final = "2.13"

# What spark.read.format("kafka") cannot run without.
REQUIRED: Final = (
    f"spark-sql-kafka-0-10_{SCALA_BINARY}",
    f"spark-token-provider-kafka-0-10_{SCALA_BINARY}",
    "kafka-clients",
    "commons-pool2",
)

# ``<artifactId>-<version>[-<classifier>].jar``, where a version starts with
# ``<digits>.``; ``spark-sql-kafka-0-10_2.13-4.2.0.jar`` is ``spark-sql-kafka-0-10_2.13``.
_JAR_NAME: Final = re.compile(r"^(?P<artifact>.+?)-\d+\..*\.jar$")


def artifact_id(jar: Path) -> str:
    """The Maven artifact id in a jar's file name (the name itself if unversioned)."""
    match = _JAR_NAME.match(jar.name)
    return match["artifact"] if match else jar.stem


def pyspark_version() -> str | None:
    try:
        return importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        return None


def pyspark_jars_dir() -> Path | None:
    """``pyspark/jars`` of the installed PySpark, found without importing it."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    jars = Path(spec.origin).parent / "jars"
    return jars if jars.is_dir() else None


def _check_pyspark_version() -> None:
    installed = pyspark_version()
    if installed is not None and installed != versions.SPARK:
        raise BuildError(
            f"pyspark {installed} is installed but the stack pins Spark {versions.SPARK} "
            "(sluice_dev/versions.py); spark-sql-kafka must match pyspark exactly"
        )


def _build(target: Path) -> None:
    _check_pyspark_version()
    jars = target / "jars"
    maven_copy(
        POM,
        jars,
        {"spark.version": versions.SPARK, "scala.binary.version": SCALA_BINARY},
    )
    shipped = pyspark_jars_dir()
    if shipped is None:
        return
    already = {artifact_id(jar) for jar in shipped.glob("*.jar")}
    for jar in jars.glob("*.jar"):
        if artifact_id(jar) in already:
            jar.unlink()
    copied = {artifact_id(jar) for jar in jars.glob("*.jar")}
    for needed in REQUIRED:
        if needed not in copied:
            raise BuildError(f"{needed} is missing from {jars} (copied: {sorted(copied)})")


ARTIFACT: Final = Artifact(NAME, versions.SPARK, _build, recipe=(POM,))


def spark_jars(layout: Layout) -> list[Path]:
    """The jars to list in ``spark.jars`` (comma-separated) for the Kafka source.

    Raises ``RuntimeError`` when the artifact is not provisioned yet or the installed
    pyspark is not the pinned Spark version.
    """
    if not ARTIFACT.ready(layout):
        raise RuntimeError(
            f"{NAME} {versions.SPARK} is not provisioned in {ARTIFACT.path(layout)}; "
            "run `sluice-dev provision`"
        )
    installed = pyspark_version()
    if installed is not None and installed != versions.SPARK:
        raise RuntimeError(
            f"pyspark {installed} is installed but {NAME} was built for Spark {versions.SPARK}"
        )
    return sorted((ARTIFACT.path(layout) / "jars").glob("*.jar"))


CLASS_ARCHIVE: Final = "spark-class-archive"
ARCHIVE_FILE: Final = "spark.jsa"
TRAINING: Final = REPO_ROOT / "job" / "sluice_job" / "class_archive.py"


def _java() -> Path | None:
    """The ``java`` a driver's PySpark launches: ``$JAVA_HOME/bin/java``, else the
    one on ``PATH``, its links resolved."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found else None


def _archive_settings() -> list[str]:
    """What the JVM checks an archive against, so that another JDK or another PySpark
    install makes a new one: the JDK's binary, and the size and time of every jar of
    ``pyspark/jars`` (the driver's class path)."""
    java = _java()
    settings = [f"java {java} {java.stat().st_mtime_ns if java else ''}"]
    jars = pyspark_jars_dir()
    if jars is not None:
        for jar in sorted(jars.glob("*.jar")):
            stat = jar.stat()
            settings.append(f"{jar.name} {stat.st_size} {stat.st_mtime_ns}")
    return settings


def _build_archive(target: Path) -> None:
    """``python -m sluice_job.class_archive``, with the interpreter the drivers of the
    node agent run (this one's)."""
    run([sys.executable, "-m", "sluice_job.class_archive", str(target / ARCHIVE_FILE)])


ARCHIVE_ARTIFACT: Final = Artifact(
    CLASS_ARCHIVE,
    versions.SPARK,
    _build_archive,
    recipe=(TRAINING,),
    settings=_archive_settings,
    compiles=True,
)


def class_archive(layout: Layout) -> Path:
    """The class archive of the drivers' JVM; raises ``RuntimeError`` when it is not
    provisioned."""
    if not ARCHIVE_ARTIFACT.ready(layout):
        raise RuntimeError(
            f"{CLASS_ARCHIVE} is not provisioned in {ARCHIVE_ARTIFACT.path(layout)}; "
            "run `sluice-dev provision`"
        )
    return ARCHIVE_ARTIFACT.path(layout) / ARCHIVE_FILE


def job_image_env(layout: Layout) -> dict[str, str]:
    """The job image's Spark environment (``Dockerfile.job``'s ``ENV``) for code roots
    on the node agent: Spark's Kafka jars and the class archive, provisioned first."""
    from sluice_dev import stack

    stack.provision(layout, [NAME, CLASS_ARCHIVE], say=lambda _line: None)
    return {
        env_names.SPARK_JARS: ",".join(str(jar) for jar in spark_jars(layout)),
        env_names.SPARK_CLASS_ARCHIVE: str(class_archive(layout)),
    }


ARTIFACTS: tuple[Artifact, ...] = (ARTIFACT, ARCHIVE_ARTIFACT)
SERVERS: tuple[Server, ...] = ()
