"""Reaching API servers (client-go's ``rest`` and ``transport``): the plumbing beneath clusters.

:mod:`mcr.rest.config` (:class:`RestConfig`, :func:`load_config`), :mod:`mcr.rest.kubeconfig`
(kubeconfig files), :mod:`mcr.rest.auth` (per-cluster credentials), :mod:`mcr.rest.tls` (shared
SSL contexts), :mod:`mcr.rest.transport` (HTTP requests and watch streams), :mod:`mcr.rest.mapper`
(discovery: kinds to resources) and :mod:`mcr.rest.kinds` (GVK, GVR, objects and models).
Most programs use none of them directly: :mod:`mcr` re-exports what a controller needs.
"""
