"""A stand-in for the driver in operator tests: same entry point, exit codes,
SIGTERM behaviour and termination message, none of Spark, Kafka or Cassandra.

Pods of the image ``sluice-test/standin`` run this code root (the node agent maps
the image here), so ``python -m sluice_job`` starts it instead of the real driver.
Behaviour comes from ``spec.transform.options.standin``:

* ``exitCode`` (with ``afterSeconds``, default 1): exit with that code by itself;
* otherwise run until SIGTERM, then write ``{"reason": "Stopped", ...}`` and exit 0;
* ``metrics: true``: serve the series the operator reads (epoch, last committed batch
  and its time: one pretend commit per second) on ``SLUICE_METRICS_PORT``, on the
  pod's own IP (``POD_IP``) as the real driver does;
* ``metrics: "huge"`` or ``metrics: "trickle"``: a hostile tenant's driver on the same
  port: it answers 1 GiB as fast as the reader takes it, or one byte every 0.2 s
  for as long as the reader waits; ``hits`` names a file that gets a line per request
  (the test's proof that the operator did come to read it);
* ``metrics: "impostor"`` with ``victim: "<namespace>/<name>"``: the honest series, and
  the same names (and the operator's phase, a dependency down, a huge lag) labelled
  with the victim's ``pipeline``: a tenant trying to publish for another pipeline;
* ``metrics: "many"`` with ``series: N``: the honest series and ``N`` more, one per
  value of a label: a driver over the scrape's sample limit.
"""
