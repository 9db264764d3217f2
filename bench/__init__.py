"""Benchmark: Sluice's micro-batch loop against Spark Structured Streaming (``make bench``).

One local stack (the ``sluice-dev`` Kafka and Cassandra), the same data, the same
transform (``sluice_job.examples.events:transform``: one cleaned row per event,
chosen over the KPI example because a per-event row lets us time each event's
visibility) and the same table shape (``bench.fixtures.EVENTS_TABLE``). Each system
runs as its own process with the same Spark configuration
(``sluice_job.spark.spark_conf``, ``local[2]``) and writes Cassandra the way its user
gets to:

* **Sluice**: the real driver, ``python -m sluice_job``, configured like the operator
  configures it (``SLUICE_CONFIG`` and friends), writing with its own sink
  (``sluice_job.sinks.cassandra.CassandraSink``);
* **Sluice low-latency**: the same driver and spec with ``trigger.mode: LowLatency``
  (no interval, a small batch in one task; its own checkpoint key);
* **Structured Streaming** (the baseline, ``bench.structured_job``): ``readStream``
  from spark-sql-kafka with ``maxOffsetsPerTrigger = cap x partitions``,
  ``foreachBatch`` applying the same transform and writing with what a user writes
  without a Spark Cassandra Connector for Spark 4 (``bench.baseline_writer``:
  ``foreachPartition`` over ``Row`` objects, one prepared INSERT per row,
  ``execute_concurrent_with_args`` with concurrency 64), ``checkpointLocation`` on
  local disk. The writer each contender used is named in the results.

A run has three phases, each system in turn (never both at once, nor with the
ceiling), with fresh topics and a fresh keyspace:

1. **Throughput**: a backlog of ``--events`` JSON events on ``--partitions`` partitions,
   drained as fast as possible (trigger 0, per-partition cap ``--cap``). Records/s =
   records / (end of the last batch - start of the first batch), both taken from the
   system's own per-batch reports (Sluice: the ``batch`` log event's time minus its
   ``batch_s``; Structured Streaming: the progress report's ``timestamp`` plus
   ``durationMs.triggerExecution``). JVM start-up is excluded for both and reported
   apart (``process_seconds``).
2. **Latency**, at two rates (``bench.pacing``): a *sustainable* one,
   ``--sustained-share`` (0.7) of the slower contender's records/s from phase 1
   rounded down to two significant digits, and the *target* ``--rate`` (5k/s), each
   with a ``--trigger`` (1 s) micro-batch interval. Events are produced at the rate
   once the fresh process has processed one trigger's worth of priming events (its
   first batch starts the Python workers and their Cassandra sessions: start-up, not
   latency) and after ``--warmup-seconds``. Every ``--sample-every``-th event produced
   after the warm-up is a probe: the bench notes the monotonic time just before
   handing it to the Kafka producer, and a poller asks Cassandra every
   ``--poll-interval`` seconds which probes are visible (``SELECT ... WHERE event_id
   IN ?``). Latency = the time the SELECT that first returned the row came back -
   the produce time: an upper bound, late by at most one poll period plus one round
   trip (the measured mean poll period is in the results). A contender that *fell
   behind* (at the end of producing, more than ``--behind-triggers`` (5) trigger
   intervals' worth of events not in a finished batch, or probes never seen within
   ``--drain-timeout``) did **not sustain** the rate: its figures stay in the JSON,
   flagged ``sustained: false``, and the table says "not sustained" instead.
3. **Ceiling** (``bench.ceiling``): what a standalone client alone gets into a table
   of the same shape with the best method measured (token-aware unlogged batches of
   rows sharing a replica set, several processes, ``USING TIMESTAMP``), so each
   contender's throughput is also reported as a share of it.

Checkpoint cost per batch, from the throughput and latency phases' batches:

* Sluice: the commit LWT (``commit_lwt_s`` of the driver's ``batch`` log event) is
  the per-batch commit; the checkpoint cost adds the plain batch-history INSERT that
  follows it (the rest of ``commit_s``) and the write-ahead ``plan`` LWT (``plan_s``);
* Structured Streaming: the progress report's ``durationMs.walCommit`` (offset-log
  write before the batch, plus committing the previous offsets to the source and
  purging old log files) and ``durationMs.commitOffsets`` (commit-log write after the
  batch). ``latestOffset`` (asking Kafka for its end offsets, the counterpart of
  Sluice's watermark fetch) and ``queryPlanning`` are reported but are not
  checkpointing.

``--runs`` (3; ``BENCH_RUNS``; 1 with ``--smoke``) whole runs, each with its own
topics and keyspace (nothing is reused between runs). Each run's results go to
``bench/results/<stamp>.json``, ``.md`` and ``.png`` (latency and checkpoint
distributions), its logs to ``bench/results/<stamp>-logs/``; the summary
(``bench.summary``: the median of each figure over the runs, and each run's row) to
``bench/results/<first stamp>-summary.json`` and ``.md`` (also printed), with the
median run's plot as ``.png``. Targets (the issue's) are reported, never asserted.
"""
