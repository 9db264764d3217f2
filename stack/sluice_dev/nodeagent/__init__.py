"""The node agent: the project's stand-in for a kubelet.

No kubelet can run on a development machine (no container runtime, no cgroups to
manage), yet the operator must be tested against a real kube-apiserver, scheduler and
controller-manager. The agent registers Node objects, heartbeats them, runs each pod
bound to them as local processes (one process group per container), reports pod
status the way a kubelet does, and honours graceful deletion. As a kubelet does, it
gives each pod an IP of its own (in 127.0.0.0/8, so two pods can bind the same
port), every container the ``kubernetes`` Service's variables naming the API server,
and a container without a ``command`` its image's entrypoint (the code root's
``image.entrypoint``, else the agent's ``--default-entrypoint``): what Spark's
executor pods, created by a driver, need. It can also fake node faults: a
*partition* (heartbeats and API writes stop, processes keep running: a zombie) and a
*crash* (processes SIGKILLed, heartbeats stop).

Modules, each with one concern: :mod:`.images` (image to local code root),
:mod:`.podspec` (pod spec to launch plan, pure), :mod:`.podnet` (a pod's IP, pure),
:mod:`.kubeservice` (the ``kubernetes`` Service's variables, pure), :mod:`.status`
(pod status patches, pure), :mod:`.runtime` (processes), :mod:`.podrun` (one pod's
local life), :mod:`.node` (Node, heartbeat, Lease), :mod:`.informer` (list+watch of
bound pods), :mod:`.sources` (Secrets/ConfigMaps for env), :mod:`.serviceaccount`
(a pod's token as a kubeconfig), :mod:`.settings` (configuration, base environment),
:mod:`.clock` (API timestamps), :mod:`.agent` (the per-node loop and faults),
:mod:`.control` (the HTTP switches), ``__main__`` (the command line).
"""
