"""What the operator and the driver agree on, in one package both import.

The spec model (``spec``, its sections in ``source``, ``transform``, ``sink``,
``dead_letter``, ``checkpoint``, ``trigger``, ``spark``, ``resources``, ``pod``,
``replacement`` and ``offset_reset``), the exit codes (``exitcodes``), the
termination message (``termination``: written by the driver, read by the operator),
the environment variables the operator sets on a driver (``env``), the names of the
resource, its labels and annotations (``names``) and the metric names the operator
reads and the alerts use (``metrics``). It depends on pydantic only: never on Spark,
Kubernetes clients, or either side's package (an import-linter contract keeps it so).
"""
