"""Real nodes for the local stack: the pinned kubelet with containerd and runc, each in
a network namespace of the stack's own (see :mod:`sluice_dev.netns`)."""
