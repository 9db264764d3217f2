"""The local stack's monitoring: the Prometheus Operator, Prometheus and Alertmanager
of ``sluice-dev up monitoring``, wired so that the chart's PodMonitor, ServiceMonitor
and PrometheusRule reach Prometheus only through the operator.

The servers are in :mod:`sluice_dev.servers.prometheus_operator`,
:mod:`~sluice_dev.servers.prometheus`, :mod:`~sluice_dev.servers.alertmanager` and
:mod:`~sluice_dev.servers.monitoring`; this package holds what they need besides a
command line: the objects the stack creates for the operator (:mod:`.resources`), the
config reloader's pure steps (:mod:`.promconfig`) and its loop (:mod:`.reloader`),
the stand-in for the disabled EndpointSlice controller (:mod:`.endpointslices`,
:mod:`.slicesync`), and a client of Prometheus's and Alertmanager's HTTP APIs
(:mod:`.client`).
"""
