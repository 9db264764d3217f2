"""The chart's Grafana dashboard (``charts/sluice/files/dashboard.json``) without
Grafana: its queries, as Grafana would send them to Prometheus (:mod:`.queries`),
their answers fetched over Prometheus's query API (:mod:`.fetch`), and the key
panels (throughput, lag, batch latency, commits) as a terminal summary
(:mod:`.summary`) or a PNG (:mod:`.plot`), for ``sluice-dev dashboard``.

Grafana's licence rules it out of this repository's stack; what a person needs from
the dashboard on the local stack is to see that each panel has data and how the
demo's latency, lag and commits moved over time.
"""
