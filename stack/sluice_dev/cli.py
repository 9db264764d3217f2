"""``sluice-dev``: the command line of the local stack.

sluice-dev provision [ARTIFACT...] [--real-nodes] [--monitoring]   build/download
                                     everything, cached by version (--real-nodes: the
                                     real nodes' too; --monitoring: Prometheus's)
sluice-dev up [SERVER...]            start servers (and what they need); idempotent;
                                     optional ones (cassandra-secure, monitoring) only
                                     when named
sluice-dev down [--purge]            stop everything the stack started
sluice-dev stop SERVER [--kill]      stop one server, keeping its data
sluice-dev restart SERVER [--down S] [--kill]   stop one server, wait S seconds, start it
sluice-dev status                    health of every server; exit 1 if any is down
sluice-dev env                       `export` lines for clients of the stack
sluice-dev logs SERVER [--lines N] [-f]   a server's (or a stack operator's) log
sluice-dev logs POD [-n NS] [-c C] [-p]    a pod's log, from the node agent's files
sluice-dev node partition|crash|heal NODE   fault switches of the node agent
sluice-dev produce --topic T --rate R --count N   sample events with sequence numbers
sluice-dev produce --pubsub --topic T [--subscription S] --count N   the same, to Pub/Sub
sluice-dev cql "STATEMENT"           a CQL statement on the stack's Cassandra, rows as a table
sluice-dev image build DIR --tag NAME:TAG   a derived job image for the node agent
sluice-dev operator start|stop [--namespace NS]   an operator serving one namespace
sluice-dev pipeline apply FILE [--namespace NS] [--cql FILE]   a manifest run on the stack
sluice-dev demo                      the KPI pipeline through a node failure and an upgrade
sluice-dev soak [--events N] [--faults N] [--rate R] [--seed S]   the chaos soak (make soak)
sluice-dev dashboard [--summary] [--png FILE] [--pipeline RE] [--all]   the chart's
                                     dashboard's key panels from the stack's Prometheus
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from sluice_dev import netns, registry, stack
from sluice_dev.artifacts import Artifact
from sluice_dev.build import BuildError
from sluice_dev.imagebuild import ImageBuildError
from sluice_dev.oci.podman import PodmanError
from sluice_dev.paths import Layout
from sluice_dev.realnode.runtime import NodeError
from sluice_dev.servers.base import Server


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    layout = Layout.from_env()
    try:
        if netns.ENABLED and args.command not in _OUTSIDE:
            netns.enter(layout)
        return int(args.run(layout, args))
    except (
        stack.StackError,
        BuildError,
        ImageBuildError,
        PodmanError,
        netns.NetnsError,
        NodeError,
    ) as err:
        print(f"sluice-dev: {err}", file=sys.stderr)
        return 1
    except KeyError as err:
        print(f"sluice-dev: {err.args[0]}", file=sys.stderr)
        return 2


_OUTSIDE = frozenset({"provision", "images"})
"""Commands that fetch from the package registries: they stay on the machine's
network, never in the stack's namespace (which reaches nothing outside)."""


def _names(items: Sequence[Artifact | Server]) -> str:
    return "one of: " + ", ".join(item.name for item in items)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sluice-dev", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    cmd = sub.add_parser("provision", help="build or fetch every artifact, cached by version")
    cmd.add_argument(
        "artifacts", nargs="*", metavar="ARTIFACT", help=_names(registry.every_artifact())
    )
    cmd.add_argument(
        "--real-nodes",
        action="store_true",
        help="also what real nodes need (kubelet, kube-proxy, pause, CoreDNS), which a "
        "plain provision leaves to a worker's first start",
    )
    cmd.add_argument(
        "--monitoring",
        action="store_true",
        help="also what `sluice-dev up monitoring` runs (the Prometheus Operator, "
        "Prometheus, Alertmanager), which a plain provision leaves to its first start",
    )
    cmd.set_defaults(run=_provision)

    cmd = sub.add_parser(
        "up", help="start servers (default: all but the optional ones) and wait until healthy"
    )
    cmd.add_argument("servers", nargs="*", metavar="SERVER", help=_names(registry.SERVERS))
    cmd.set_defaults(run=_up)

    cmd = sub.add_parser("down", help="stop every process of the stack")
    cmd.add_argument("--purge", action="store_true", help="also delete data and configuration")
    cmd.set_defaults(run=_down)

    cmd = sub.add_parser("stop", help="stop one server, keeping its data")
    cmd.add_argument("server", choices=[s.name for s in registry.SERVERS])
    cmd.add_argument("--kill", action="store_true", help="SIGKILL at once: a crash")
    cmd.set_defaults(run=_stop)

    cmd = sub.add_parser("restart", help="stop one server and start it again with its data")
    cmd.add_argument("server", choices=[s.name for s in registry.SERVERS])
    cmd.add_argument("--down", type=float, default=0.0, metavar="SECONDS", help="time down")
    cmd.add_argument("--kill", action="store_true", help="SIGKILL instead of SIGTERM: a crash")
    cmd.set_defaults(run=_restart)

    sub.add_parser("status", help="health of each server").set_defaults(run=_status)
    sub.add_parser("env", help="print export lines for clients").set_defaults(run=_env)

    cmd = sub.add_parser(
        "exec",
        help="run a command with the clients' environment (sluice-dev env), in the "
        "stack's network namespace when SLUICE_NETNS=1: kubectl, cqlsh, a shell",
    )
    cmd.add_argument("argv", nargs=argparse.REMAINDER, metavar="COMMAND ...")
    cmd.set_defaults(run=_exec)

    cmd = sub.add_parser(
        "logs",
        help="show a server's log, a stack operator's (demo-operator, operator-NS) or a "
        "pod's (kubectl logs cannot reach the node agent)",
    )
    cmd.add_argument(
        "name",
        metavar="SERVER|POD",
        help=_names(registry.SERVERS) + "; a stack operator (demo-operator, operator-NS); a pod",
    )
    cmd.add_argument(
        "-n", "--namespace", default=None, help="the pod's namespace (default: sluice-demo)"
    )
    cmd.add_argument("-c", "--container", default=None, help="the pod's container")
    cmd.add_argument(
        "-p", "--previous", action="store_true", help="the container's run before the last"
    )
    cmd.add_argument("--lines", "--tail", type=int, default=50, help="last lines shown")
    cmd.add_argument("-f", "--follow", action="store_true")
    cmd.set_defaults(run=_logs)

    cmd = sub.add_parser("node", help="node agent fault switches")
    cmd.add_argument("action", choices=["partition", "crash", "heal"])
    cmd.add_argument("node")
    cmd.set_defaults(run=_node)

    cmd = sub.add_parser(
        "produce", help="produce sample UI events (JSON, sequence-numbered) to a topic"
    )
    cmd.add_argument("--topic", required=True)
    cmd.add_argument("--count", type=int, required=True, help="events to produce")
    cmd.add_argument("--rate", type=float, default=0.0, help="events per second (0: at once)")
    cmd.add_argument("--start", type=int, default=0, help="first sequence number")
    cmd.add_argument("--seed", type=int, default=7, help="seed of the event contents")
    cmd.add_argument("--bad-every", type=int, default=0, help="every n-th event malformed")
    cmd.add_argument("--partitions", type=int, default=4, help="partitions if the topic is created")
    cmd.add_argument("--bootstrap", default=None, help="Kafka (default: the stack's)")
    cmd.add_argument(
        "--pubsub",
        action="store_true",
        help="publish to a Pub/Sub topic (created if missing) instead of Kafka",
    )
    cmd.add_argument(
        "--project",
        default=None,
        help="Pub/Sub project (default: $PUBSUB_PROJECT_ID or the stack's)",
    )
    cmd.add_argument(
        "--subscription", default=None, help="Pub/Sub: also create this subscription to the topic"
    )
    cmd.add_argument(
        "--pubsub-host",
        default=None,
        help="Pub/Sub server host:port (default: $PUBSUB_EMULATOR_HOST or the stack's)",
    )
    cmd.set_defaults(run=_produce)

    cmd = sub.add_parser(
        "images",
        help="build Dockerfile.job and Dockerfile.operator with podman on bases made from "
        "Debian packages (installs podman, buildah, runc, mmdebstrap, and containerd and the CNI "
        "plugins for real nodes, when missing)",
    )
    cmd.add_argument(
        "--refresh-bases", action="store_true", help="make the base images again (Debian updates)"
    )
    cmd.set_defaults(run=_images)

    cmd = sub.add_parser("cql", help="run a CQL statement on the stack's Cassandra")
    cmd.add_argument("statement", help='for example "SELECT * FROM clicks.click_scores LIMIT 5"')
    cmd.set_defaults(run=_cql)

    cmd = sub.add_parser("image", help="images the node agent runs")
    images = cmd.add_subparsers(dest="image_command", required=True)
    cmd = images.add_parser(
        "build",
        help="install the Python package in DIR as image NAME:TAG, as a Dockerfile FROM "
        "the job image would (examples/custom-transform)",
    )
    cmd.add_argument("directory", type=Path, metavar="DIR", help="a package with pyproject.toml")
    cmd.add_argument("--tag", "-t", required=True, metavar="NAME:TAG", help="the image's name")
    cmd.set_defaults(run=_image_build)

    cmd = sub.add_parser("operator", help="an operator process serving one namespace")
    operators = cmd.add_subparsers(dest="operator_command", required=True)
    for action, run, what in (
        ("start", _operator_start, "start (idempotent): the CRD, the namespace, the operator"),
        ("stop", _operator_stop, "stop the operator serving the namespace"),
    ):
        cmd = operators.add_parser(action, help=what)
        cmd.add_argument("--namespace", "-n", default="sluice-demo", help="default: sluice-demo")
        cmd.set_defaults(run=run)

    cmd = sub.add_parser("pipeline", help="pipelines on the local stack")
    pipelines = cmd.add_subparsers(dest="pipeline_command", required=True)
    cmd = pipelines.add_parser(
        "apply",
        help="apply a manifest to the local stack (in --namespace, local addresses), "
        "creating its Kafka topics or Pub/Sub topics and subscription, and the tables of "
        "--cql; starts an operator for the namespace if none runs",
    )
    cmd.add_argument("file", type=Path, metavar="FILE", help="a StreamingPipeline manifest")
    cmd.add_argument(
        "--namespace",
        "-n",
        default="sluice-demo",
        help="where it runs, whatever the manifest's metadata.namespace (default: sluice-demo)",
    )
    cmd.add_argument("--cql", type=Path, metavar="FILE", help="CQL creating the sink's tables")
    cmd.set_defaults(run=_pipeline_apply)

    cmd = sub.add_parser("demo", help="run the KPI pipeline through a node failure and an upgrade")
    cmd.add_argument(
        "--events",
        type=int,
        default=None,
        help="events produced (default: 60,000 on real nodes, 36,000 on the node agent: "
        "production outlasts the upgrade)",
    )
    cmd.add_argument("--rate", type=float, default=200.0, help="events per second")
    cmd.add_argument(
        "--alerts",
        action="store_true",
        help="watched by the stack's monitoring (up monitoring, the chart's monitors and "
        "rules), a Cassandra outage added, each fault's alert timeline printed",
    )
    cmd.set_defaults(run=_demo)

    cmd = sub.add_parser(
        "soak", help="chaos soak: seeded faults under a transactional producer, then checks"
    )
    cmd.add_argument("--events", type=int, default=500_000, help="events produced")
    cmd.add_argument("--faults", type=int, default=21, help="faults, besides 2 spec changes")
    cmd.add_argument("--rate", type=float, default=350.0, help="events per second")
    cmd.add_argument("--seed", type=int, default=12, help="seed of the faults and the events")
    cmd.add_argument("--spec-changes", type=int, default=2, help="spec changes (upgrades)")
    cmd.add_argument(
        "--kinds", default="", help="comma-separated fault kinds to draw from (default: all)"
    )
    cmd.add_argument(
        "--standby",
        default="0",
        help="hot standbys: 0 (clean-stop upgrades), 1 (warm-handover upgrades), or 0,1 "
        "for one soak of each, one after the other, and both modes compared per fault kind",
    )
    cmd.add_argument(
        "--low-latency",
        action="store_true",
        help="the pipeline with trigger.mode LowLatency instead of a 1 s trigger",
    )
    cmd.set_defaults(run=_soak)

    cmd = sub.add_parser(
        "dashboard",
        help="the chart's dashboard without Grafana: its queries asked of the stack's "
        "Prometheus (sluice-dev up monitoring), the key panels as text and/or a PNG",
    )
    cmd.add_argument(
        "--summary", action="store_true", help="print the panels as text (the default)"
    )
    cmd.add_argument("--png", type=Path, metavar="FILE", help="also write the panels as a PNG")
    cmd.add_argument(
        "--pipeline", default=".*", metavar="REGEX", help="$pipeline: namespace/name (regex)"
    )
    cmd.add_argument("--minutes", type=float, default=15.0, help="the window (default 15)")
    cmd.add_argument("--step", type=float, default=15.0, help="seconds between points")
    cmd.add_argument(
        "--all", action="store_true", help="every panel, not only throughput, lag, latency, commits"
    )
    cmd.set_defaults(run=_dashboard)
    return parser


def _dashboard(layout: Layout, args: argparse.Namespace) -> int:
    from sluice_dev.dashboard import fetch, plot, queries, summary
    from sluice_dev.servers import prometheus

    del layout
    wanted = [q for q in queries.queries(queries.load()) if args.all or q.key]
    answers = fetch.ask(
        prometheus.URL, wanted, pipeline=args.pipeline, minutes=args.minutes, step=args.step
    )
    if args.summary or not args.png:
        print(summary.render(answers))
    if args.png:
        print(f"wrote {plot.write_png(answers, args.png, f'Sluice: {args.pipeline}')}")
    return 1 if summary.missing(answers) else 0


def _provision(layout: Layout, args: argparse.Namespace) -> int:
    started = time.monotonic()
    stack.provision(
        layout,
        args.artifacts or None,
        say=lambda line: print(line, flush=True),
        real_nodes=args.real_nodes,
        monitoring=args.monitoring,
    )
    print(f"provisioned in {time.monotonic() - started:.1f}s (cache: {layout.cache})")
    return 0


def _images(layout: Layout, args: argparse.Namespace) -> int:
    from sluice_dev.oci import hostpackages, images
    from sluice_dev.oci.podman import Podman
    from sluice_dev.realnode import binaries as realnode_binaries

    started = time.monotonic()
    say = functools.partial(print, flush=True)
    # One apt-get update for both sets when something is missing.
    packages = (*hostpackages.PACKAGES, *realnode_binaries.PACKAGES)
    hostpackages.ensure(say, packages, "the image builds and real nodes")
    podman = Podman.for_layout(layout)
    if (why := podman.available()) is not None:
        raise stack.StackError(f"cannot build images: {why}")
    for recipe in images.RECIPES:
        built = images.build(podman, recipe, say=say, refresh_bases=args.refresh_bases)
        say(built.line(podman.image_size(built.image)) + f", also {built.dev}")
    say(f"images ready in {time.monotonic() - started:.1f}s (store: {podman.home})")
    return 0


def _up(layout: Layout, args: argparse.Namespace) -> int:
    stack.up(layout, args.servers or None)
    return 0


def _down(layout: Layout, args: argparse.Namespace) -> int:
    stack.down(layout, purge=args.purge)
    return 0


def _stop(layout: Layout, args: argparse.Namespace) -> int:
    stack.stop(layout, args.server, kill=args.kill)
    print(f"{args.server:<26} {'killed' if args.kill else 'stopped'}")
    return 0


def _restart(layout: Layout, args: argparse.Namespace) -> int:
    seconds = stack.restart(layout, args.server, down_seconds=args.down, kill=args.kill)
    print(f"{args.server} back in {seconds:.1f}s")
    return 0


def _status(layout: Layout, _args: argparse.Namespace) -> int:
    states = stack.status(layout)
    for state in states:
        print(state.line())
    return 0 if all(s.healthy for s in states) else 1


def _env(layout: Layout, _args: argparse.Namespace) -> int:
    from sluice_dev.servers import kube, tools

    for key, value in stack.exports(layout).items():
        print(f"export {key}={shlex.quote(value)}")
    # The provisioned kubectl and helm first on PATH: the README's kubectl commands
    # work without one of the user's own (or with one of another version).
    found = [kube.kubectl(layout).parent, tools.helm(layout).parent]
    print(f'export PATH={":".join(shlex.quote(str(d)) for d in found)}:"$PATH"')
    return 0


def _exec(layout: Layout, args: argparse.Namespace) -> int:
    from sluice_dev.servers import kube

    command = list(args.argv)
    if command[:1] == ["--"]:
        command = command[1:]
    command = command or [os.environ.get("SHELL", "sh")]
    tools = str(kube.kubectl(layout).parent)
    path = f"{tools}{os.pathsep}{os.environ.get('PATH', '')}"
    os.execvpe(command[0], command, {**os.environ, **stack.exports(layout), "PATH": path})


def _logs(layout: Layout, args: argparse.Namespace) -> int:
    from sluice_dev.nodeagent.podlogs import PodLogError

    try:
        path = _log_path(layout, args)
    except PodLogError as err:
        print(f"sluice-dev logs: {err}", file=sys.stderr)
        return 1
    if not path.exists():
        print(f"sluice-dev: no log yet at {path}", file=sys.stderr)
        return 1
    with path.open(errors="replace") as log:
        for line in log.readlines()[-args.lines :]:
            sys.stdout.write(line)
        while args.follow:
            line = log.readline()
            if line:
                sys.stdout.write(line)
                sys.stdout.flush()
            else:
                time.sleep(0.2)
    return 0


def _log_path(layout: Layout, args: argparse.Namespace) -> Path:
    """A server's or a stack process's log, unless a pod is meant: ``-n``, ``-c`` or
    ``-p`` given, or no such log in the stack directory."""
    from sluice_dev import demo
    from sluice_dev.nodeagent import podlogs
    from sluice_dev.servers import nodeagent

    pod_options = args.namespace or args.container or args.previous
    servers = {server.name for server in registry.SERVERS}
    if not pod_options and (args.name in servers or layout.log(args.name).exists()):
        return layout.log(args.name)
    return podlogs.find(
        nodeagent.state_dir(layout),
        args.namespace or demo.NAMESPACE,
        args.name,
        args.container,
        previous=args.previous,
    )


def _node(layout: Layout, args: argparse.Namespace) -> int:
    from sluice_dev.nodeagent import control

    action = {"partition": control.partition, "crash": control.crash, "heal": control.heal}
    action[args.action](layout, args.node)
    print(f"{args.node}: {args.action}")
    return 0


def _cql(_layout: Layout, args: argparse.Namespace) -> int:
    from cassandra import DriverException, OperationTimedOut
    from cassandra.cluster import NoHostAvailable

    from sluice_dev import cqlquery
    from sluice_dev.servers.cassandra import CONTACT

    try:
        lines = cqlquery.run(CONTACT, args.statement)
    except (DriverException, NoHostAvailable, OperationTimedOut) as err:  # Cassandra's words
        print(f"sluice-dev cql: {err}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


def _produce(layout: Layout, args: argparse.Namespace) -> int:
    if args.pubsub:
        return _publish(layout, args)
    if args.subscription or args.project or args.pubsub_host:
        print(
            "sluice-dev produce: --project, --subscription and --pubsub-host need --pubsub",
            file=sys.stderr,
        )
        return 2
    from sluice_dev.events import EventFactory
    from sluice_dev.produce import ensure_topic, produce
    from sluice_dev.servers.kafka import BOOTSTRAP

    bootstrap = args.bootstrap or BOOTSTRAP
    if ensure_topic(bootstrap, args.topic, args.partitions):
        print(f"created topic {args.topic} with {args.partitions} partitions")
    factory = EventFactory(seed=args.seed, bad_every=args.bad_every)
    began = time.monotonic()
    count = produce(
        bootstrap,
        args.topic,
        args.count,
        start=args.start,
        rate=args.rate or None,
        factory=factory,
        progress=lambda n: print(f"  {n:,} produced", flush=True),
    )
    last = args.start + count - 1
    print(
        f"produced {count:,} events (seq {args.start}..{last}) to {args.topic} "
        f"in {time.monotonic() - began:.1f}s"
    )
    return 0


def _publish(_layout: Layout, args: argparse.Namespace) -> int:
    import os

    from sluice_dev import probes
    from sluice_dev.events import EventFactory
    from sluice_dev.pubsub import publish
    from sluice_dev.servers import pubsub

    host = args.pubsub_host or os.environ.get("PUBSUB_EMULATOR_HOST") or pubsub.HOST
    project = args.project or os.environ.get("PUBSUB_PROJECT_ID") or pubsub.PROJECT
    address, _, port = host.rpartition(":")
    unreachable = probes.tcp_open(address, int(port)) if port.isdigit() else "not host:port"
    if unreachable:
        print(
            f"sluice-dev produce: no Pub/Sub server at {host} ({unreachable}); "
            "start the stack's with `sluice-dev up pubsub`",
            file=sys.stderr,
        )
        return 1
    if publish.ensure_topic(host, project, args.topic):
        print(f"created topic {publish.topic_path(project, args.topic)}")
    if args.subscription and publish.ensure_subscription(
        host, project, args.topic, args.subscription
    ):
        print(f"created subscription {publish.subscription_path(project, args.subscription)}")
    factory = EventFactory(seed=args.seed, bad_every=args.bad_every)
    began = time.monotonic()
    count = publish.publish(
        host,
        project,
        args.topic,
        args.count,
        start=args.start,
        rate=args.rate or None,
        factory=factory,
        progress=lambda n: print(f"  {n:,} published", flush=True),
    )
    last = args.start + count - 1
    print(
        f"published {count:,} events (seq {args.start}..{last}) to "
        f"{publish.topic_path(project, args.topic)} at {host} in {time.monotonic() - began:.1f}s"
    )
    return 0


def _image_build(layout: Layout, args: argparse.Namespace) -> int:
    from sluice_dev import imagebuild
    from sluice_dev.servers import spark

    ref = imagebuild.parse_reference(args.tag)
    imagebuild.check_source(args.directory)
    built = imagebuild.build(
        layout, args.directory.resolve(), ref, spark.job_image_env(layout), say=print
    )
    print(f"built {built.ref}: {', '.join(built.packages)} in {built.directory}")
    print(f"pods of image {built.ref} on the node agent now import it (spec.image: {built.ref})")
    return 0


def _operator_start(layout: Layout, args: argparse.Namespace) -> int:
    from sluice_dev import localrun

    print(f"the operator serving namespace {args.namespace}")
    localrun.start_operator(layout, args.namespace, say=print)
    return 0


def _operator_stop(layout: Layout, args: argparse.Namespace) -> int:
    from sluice_dev import localrun

    pid = localrun.stop_operator(layout, args.namespace)
    state = "not running" if pid is None else f"stopped (pid {pid})"
    print(f"the operator serving namespace {args.namespace}: {state}")
    return 0


def _pipeline_apply(layout: Layout, args: argparse.Namespace) -> int:
    from sluice_dev import localrun

    answer = localrun.apply(layout, args.file, args.cql, say=print, namespace=args.namespace)
    print(answer.rstrip())
    print(
        f'watch it:  eval "$(.venv/bin/sluice-dev env)"; kubectl -n {args.namespace} get sp -o wide'
    )
    return 0


def _demo(layout: Layout, args: argparse.Namespace) -> int:
    from sluice_dev import demo

    return demo.run(layout, events=args.events, rate=args.rate, alerts=args.alerts)


def _soak(layout: Layout, args: argparse.Namespace) -> int:
    from datetime import datetime

    from sluice_dev.soak import report, run

    def say(text: str) -> None:
        print(f"[soak {datetime.now().strftime('%H:%M:%S')}] {text}", flush=True)

    from sluice_dev.soak.schedule import FAULT_KINDS, FaultKind

    try:
        kinds = tuple(FaultKind(k) for k in args.kinds.split(",") if k) or FAULT_KINDS
    except ValueError as err:
        known = ", ".join(k.value for k in FaultKind)
        print(f"sluice-dev soak: --kinds: {err}; known: {known}", file=sys.stderr)
        return 2
    standbys = [s.strip() for s in args.standby.split(",")]
    if not standbys or any(s not in ("0", "1") for s in standbys):
        print(f"sluice-dev soak: --standby: {args.standby!r}: 0, 1 or 0,1", file=sys.stderr)
        return 2
    summaries = []
    for standby in standbys:
        options = run.Options(
            events=args.events,
            faults=args.faults,
            rate=args.rate,
            seed=args.seed,
            spec_changes=args.spec_changes,
            kinds=kinds,
            standby=int(standby),
            low_latency=args.low_latency,
        )
        try:
            summaries.append(run.run(layout, options, say))
        except run.SoakError as err:
            print(f"sluice-dev soak: standby {standby}: {err}", file=sys.stderr)
            return 1
    if len(summaries) > 1:
        print(flush=True)
        for line in report.compare(summaries):
            print(line, flush=True)
    return 0 if all(summary.passed for summary in summaries) else 1
