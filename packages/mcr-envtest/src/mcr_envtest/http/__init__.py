"""The HTTP side of the server: one aiohttp route, Kubernetes URL parsing, authentication and
authorization, content negotiation, and the verbs.

:mod:`.routes` (:class:`~mcr_envtest.http.routes.Api`) parses each request and hands it to a verb
module: :mod:`.read` (get, list), :mod:`.watch`, :mod:`.write` (create, update, patch, apply,
delete, deletecollection) and :mod:`.subresources` (scale, finalize, token, reviews). Those read
request bodies and options with :mod:`.body` and answer in the negotiated representation with
:mod:`.render`; :mod:`.context` holds the parsed request and what a verb may use of its server.
"""
