"""Container images built for real: podman and buildah from Debian, runc, no registry.

``podman`` runs podman with the stack's own store and configuration (never the
machine's), ``hostpackages`` installs the Debian packages it needs, ``bases`` makes the
base images from Debian packages with mmdebstrap (no image registry is reachable
here), ``dockerfile`` reads the parts of a Dockerfile the build and the tests need,
and ``images`` builds Dockerfile.job and Dockerfile.operator on those bases, cached
by what goes into them.
"""
