"""Benchmark: Sluice's micro-batch loop against Spark Structured Streaming (``make bench``).

One run, one local stack (the ``sluice-dev`` Kafka and Cassandra), the same data, the
same transform (``sluice_job.examples.events:transform``: one cleaned row per event,
chosen over the KPI example because a per-event row lets us time each event's
visibility) and the same Cassandra writer (``CassandraSink.write``, i.e.
``sluice_job.sinks.cassandra.write_rows`` through ``foreachPartition``). Each system
runs as its own process with the same Spark configuration
(``sluice_job.spark.spark_conf``, ``local[2]``):

* **Sluice**: the real driver, ``python -m sluice_job``, configured like the operator
  configures it (``SLUICE_CONFIG`` and friends);
* **Structured Streaming** (the baseline, ``bench.structured_job``): ``readStream``
  from spark-sql-kafka with ``maxOffsetsPerTrigger = cap x partitions``,
  ``foreachBatch`` applying the same transform and calling the same writer,
  ``checkpointLocation`` on local disk.

Two phases, each system in turn (never both at once):

1. **Throughput**: a backlog of ``--events`` JSON events on ``--partitions`` partitions,
   drained as fast as possible (trigger 0, per-partition cap ``--cap``). Records/s =
   records / (end of the last batch - start of the first batch), both taken from the
   system's own per-batch reports (Sluice: the ``batch`` log event's time minus its
   ``batch_s``; Structured Streaming: the progress report's ``timestamp`` plus
   ``durationMs.triggerExecution``). JVM start-up is excluded for both and reported
   apart (``process_seconds``).
2. **Latency**: events produced at a steady ``--rate`` (5k/s) with a ``--trigger``
   (1 s) micro-batch interval, once the fresh process has processed one trigger's
   worth of priming events (its first batch starts the Python workers and their
   Cassandra sessions: start-up, not latency) and after ``--warmup-seconds``. Every
   ``--sample-every``-th event produced after the warm-up is a probe: the bench notes
   the monotonic time just before handing it to the Kafka producer, and a poller asks
   Cassandra every ``--poll-interval`` seconds which probes are visible (``SELECT ...
   WHERE event_id IN ?``). Latency = the time the SELECT that first returned the row
   came back - the produce time: an upper bound, late by at most one poll period plus
   one round trip (the measured mean poll period is in the results).

Checkpoint cost per batch, from both phases' batches:

* Sluice: the commit LWT (``commit_lwt_s`` of the driver's ``batch`` log event) is
  the per-batch commit; the checkpoint cost adds the plain batch-history INSERT that
  follows it (the rest of ``commit_s``) and the write-ahead ``plan`` LWT (``plan_s``);
* Structured Streaming: the progress report's ``durationMs.walCommit`` (offset-log
  write before the batch, plus committing the previous offsets to the source and
  purging old log files) and ``durationMs.commitOffsets`` (commit-log write after the
  batch). ``latestOffset`` (asking Kafka for its end offsets, the counterpart of
  Sluice's watermark fetch) and ``queryPlanning`` are reported but are not
  checkpointing.

Results go to ``bench/results/<stamp>.json``, ``.md`` (the table, also printed) and
``.png`` (latency and checkpoint distributions); logs of the run to
``bench/results/<stamp>-logs/``.
"""
