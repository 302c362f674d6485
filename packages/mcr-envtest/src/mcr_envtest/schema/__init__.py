"""Schemas and the tables derived from upstream's API definitions.

:mod:`.builtin`: OpenAPI schemas of the built-in kinds (from the ``kubernetes`` client's models);
:mod:`.structural`: a CRD version's schema and the rewrites it drives (pruning, defaulting);
:mod:`.protobuf`: protobuf request bodies of the built-in kinds; :mod:`.default_roles`: upstream's
bootstrap ClusterRoles.
"""
