"""Group/version/kind identities and conversions between plain dicts and ``kubernetes`` models.

mcr keeps objects as decoded JSON (dicts). A caller that passes a ``kubernetes.client`` model class
(``V1ConfigMap``, ``V1Deployment``, …) gets models back; :func:`gvk_of` maps such a class to its
GVK. The model → group table is derived from the installed ``kubernetes`` package itself (the
request paths of its generated ``read_*`` operations), lazily and once per API version, so new
client releases need no table edits here.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

__all__ = [
    "GVK",
    "GVR",
    "KindLike",
    "gvk_of",
    "is_model_class",
    "model_class_for",
    "object_key",
    "to_dict",
    "to_model",
]


@dataclass(frozen=True, slots=True)
class GVK:
    """A group, version and kind; the core group is ``""``."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        """``"v1"`` for the core group, else ``"<group>/<version>"``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        """Deprecated: the same as :attr:`api_version`; removed in a later release."""
        warnings.warn(
            "GVK.group_version is deprecated; use GVK.api_version", DeprecationWarning, stacklevel=2
        )
        return self.api_version

    @classmethod
    def from_api_version(cls, api_version: str, kind: str) -> GVK:
        """Split ``apiVersion`` (``"v1"``, ``"apps/v1"``) and pair it with ``kind``."""
        group, _, version = api_version.rpartition("/")
        return cls(group, version, kind)

    def __str__(self) -> str:
        return f"{self.api_version}/{self.kind}"


@dataclass(frozen=True, slots=True)
class GVR:
    """A group, version and resource (plural, lower-case); the core group is ``""``."""

    group: str
    version: str
    resource: str

    @property
    def api_version(self) -> str:
        """``"v1"`` for the core group, else ``"<group>/<version>"``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.api_version}/{self.resource}"


#: Anything that names a kind: a ``kubernetes.client`` model class, a GVK, or a string
#: (``"v1/ConfigMap"``, ``"apps/v1/Deployment"``, ``"example.com/v1/Widget"``, ``"ConfigMap"``).
KindLike: TypeAlias = "type[Any] | GVK | str"

M = TypeVar("M")

_MODEL_NAME = re.compile(
    r"^(?P<prefix>[A-Z][a-z]+)?(?P<version>V\d+(?:(?:alpha|beta)\d+)?)(?P<kind>[A-Z]\w*)$"
)

# Files scanned first: the groups controllers use most, so the common case reads few files.
_PREFERRED_FILES = (
    "core_",
    "apps_",
    "coordination_",
    "events_",
    "rbac_authorization_",
    "apiextensions_",
    "batch_",
    "networking_",
    "policy_",
    "autoscaling_",
)


class _ModelTable:
    """Model class name → (group, version, kind), read from the generated API modules' source text.

    Each ``read_*`` operation names its response model and its request path
    (``/apis/<group>/<version>/.../{name}``), which gives the model's group without importing the
    (large) API modules. Scanning is done per API version on first use and cached.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_model: dict[str, GVK] = {}
        self._scanned_files: set[str] = set()
        self._files: list[str] | None = None

    def _api_files(self) -> list[str]:
        if self._files is None:
            spec = importlib.util.find_spec("kubernetes.client")
            if spec is None or spec.origin is None:  # pragma: no cover - kubernetes is a dependency
                self._files = []
                return self._files
            api_dir = os.path.join(os.path.dirname(spec.origin), "api")
            names = sorted(n for n in os.listdir(api_dir) if n.endswith("_api.py"))

            def rank(name: str) -> tuple[int, str]:
                for i, prefix in enumerate(_PREFERRED_FILES):
                    if name.startswith(prefix):
                        return (i, name)
                return (len(_PREFERRED_FILES), name)

            self._files = [os.path.join(api_dir, n) for n in sorted(names, key=rank)]
        return self._files

    def _scan(self, path: str) -> None:
        with open(path, encoding="utf-8") as f:
            src = f.read()
        pos = 0
        while True:
            i = src.find("def read_", pos)
            if i < 0:
                break
            j = src.find("(", i)
            pos = j
            op = src[i + 9 : j]
            if op.endswith(("_with_http_info", "_without_preload_content")):
                continue
            k = src.find("'200': \"", j)
            if k < 0:
                continue
            model = src[k + 8 : src.find('"', k + 8)]
            s = src.find(f"def _read_{op}_serialize(")
            r = src.find("resource_path='", s) if s >= 0 else -1
            if r < 0:
                continue
            req_path = src[r + 15 : src.find("'", r + 15)]
            if not req_path.endswith("/{name}"):
                continue  # a subresource (status, scale, log, …): its model belongs elsewhere
            parts = req_path.strip("/").split("/")
            if parts[0] == "api":
                group, version = "", parts[1]
            else:
                group, version = parts[1], parts[2]
            m = _MODEL_NAME.match(model)
            if m is None:
                continue
            self._by_model.setdefault(model, GVK(group, version, m.group("kind")))

    def lookup(self, model_name: str) -> GVK | None:
        with self._lock:
            found = self._by_model.get(model_name)
            if found is not None:
                return found
            m = _MODEL_NAME.match(model_name)
            if m is None:
                return None
            suffix = f"_{m.group('version').lower()}_api.py"
            for path in self._api_files():
                if path in self._scanned_files or not path.endswith(suffix):
                    continue
                self._scan(path)
                self._scanned_files.add(path)
                if model_name in self._by_model:
                    return self._by_model[model_name]
            return None

    def model_name_for(self, gvk: GVK) -> str | None:
        """The model class name for a GVK, scanning that version's files if needed."""
        with self._lock:
            for name, known in self._by_model.items():
                if known == gvk:
                    return name
        for candidate in (f"{gvk.version.capitalize()}{gvk.kind}",):
            found = self.lookup(candidate)
            if found == gvk:
                return candidate
        with self._lock:
            suffix = f"_{gvk.version.lower()}_api.py"
            for path in self._api_files():
                if path not in self._scanned_files and path.endswith(suffix):
                    self._scan(path)
                    self._scanned_files.add(path)
            for name, known in self._by_model.items():
                if known == gvk:
                    return name
        return None


_TABLE = _ModelTable()


def is_model_class(obj: object) -> bool:
    """True if ``obj`` is a generated ``kubernetes`` model class (sync or ``kubernetes.aio``)."""
    return (
        isinstance(obj, type)
        and obj.__module__.startswith(("kubernetes.client.models", "kubernetes.aio.client.models"))
        and hasattr(obj, "from_dict")
    )


def _is_model_instance(obj: object) -> bool:
    return is_model_class(type(obj))


def _gvk_of_model_class(cls: type[Any]) -> GVK:
    gvk = _TABLE.lookup(cls.__name__)
    if gvk is None:
        raise ValueError(
            f"model class {cls.__name__} is not a top-level Kubernetes kind "
            "(no read operation of the kubernetes client returns it)"
        )
    return gvk


# Every cache get/list names its kind, usually as a string: parse each distinct string once
# (GVKs are frozen, so sharing them is safe; a bad string raises each time, it is not cached).
@functools.lru_cache(maxsize=1024)
def _gvk_of_string(s: str) -> GVK:
    parts = s.split("/")
    if len(parts) == 3:
        return GVK(parts[0], parts[1], parts[2])
    if len(parts) == 2:
        return GVK("", parts[0], parts[1])
    if len(parts) == 1 and parts[0]:
        # A bare kind: resolve it through the built-in models (stable version first).
        for prefix in ("V1", "V2", "V1beta1", "V1beta2", "V1alpha1"):
            gvk = _TABLE.lookup(f"{prefix}{parts[0]}")
            if gvk is not None:
                return gvk
        for prefix in ("Core", "Events"):
            gvk = _TABLE.lookup(f"{prefix}V1{parts[0]}")
            if gvk is not None:
                return gvk
        raise ValueError(f"kind {s!r} is not a built-in kind; name it as '<group>/<version>/<kind>'")
    raise ValueError(f"cannot parse kind {s!r}; expected 'v1/Kind', 'group/version/Kind' or 'Kind'")


def gvk_of(kind_like: object) -> GVK:
    """The GVK named by a model class or instance, a GVK, a string, or an object dict.

    Object dicts are read from ``apiVersion`` and ``kind``. Raises ``ValueError`` naming the input
    when it names no kind.
    """
    if isinstance(kind_like, GVK):
        return kind_like
    if isinstance(kind_like, str):
        return _gvk_of_string(kind_like)
    if isinstance(kind_like, Mapping):
        api_version = kind_like.get("apiVersion")
        kind = kind_like.get("kind")
        if not api_version or not kind:
            raise ValueError("object has no apiVersion and kind; pass the kind explicitly")
        return GVK.from_api_version(str(api_version), str(kind))
    if is_model_class(kind_like):
        return _gvk_of_model_class(kind_like)  # type: ignore[arg-type]  # narrowed by is_model_class above
    if _is_model_instance(kind_like):
        api_version = getattr(kind_like, "api_version", None)
        kind = getattr(kind_like, "kind", None)
        if api_version and kind:
            return GVK.from_api_version(api_version, kind)
        return _gvk_of_model_class(type(kind_like))
    raise ValueError(f"cannot tell the kind of {type(kind_like).__name__!r}")


def model_class_for(gvk: GVK, *, aio: bool = False) -> type[Any] | None:
    """The ``kubernetes.client`` (or ``kubernetes.aio.client``) model class of a built-in GVK."""
    name = _TABLE.model_name_for(gvk)
    if name is None:
        return None
    module = __import__("kubernetes.aio.client" if aio else "kubernetes.client", fromlist=[name])
    cls = getattr(module, name, None)
    return cls if isinstance(cls, type) else None


def to_dict(obj: object) -> dict[str, Any]:
    """The wire form of an object: dicts are returned as they are, models are serialised.

    Model fields that are ``None`` are left out, names use the JSON spelling (``apiVersion``),
    times are RFC 3339 strings, and ``apiVersion``/``kind`` are filled in from the model class.
    """
    if isinstance(obj, dict):
        return obj
    if isinstance(obj, Mapping):
        return dict(obj)
    if _is_model_instance(obj):
        d: dict[str, Any] = obj.model_dump(by_alias=True, exclude_none=True, mode="json")  # type: ignore[attr-defined]  # pydantic models of the kubernetes package are untyped here
        if "kind" not in d or "apiVersion" not in d:
            try:
                gvk = _gvk_of_model_class(type(obj))
            except ValueError:
                return d
            d.setdefault("apiVersion", gvk.api_version)
            d.setdefault("kind", gvk.kind)
        return d
    raise TypeError(f"cannot serialise {type(obj).__name__!r}: expected a dict or a kubernetes model")


def to_model(cls: type[M], d: Mapping[str, Any]) -> M:
    """Build a model of class ``cls`` from the wire-form dict ``d``."""
    result = cls.from_dict(dict(d))  # type: ignore[attr-defined]  # kubernetes models define from_dict; the package ships no stubs
    if result is None:  # pragma: no cover - from_dict returns None only for None input
        raise ValueError(f"cannot build {cls.__name__} from an empty object")
    return result  # type: ignore[no-any-return]  # from_dict returns the model class given


def object_key(obj: object) -> tuple[str, str]:
    """``(namespace, name)`` of an object dict or model; namespace ``""`` if cluster-scoped."""
    if isinstance(obj, Mapping):
        meta = obj.get("metadata") or {}
        return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    meta_obj = getattr(obj, "metadata", None)
    if meta_obj is None:
        return ("", "")
    return (str(getattr(meta_obj, "namespace", None) or ""), str(getattr(meta_obj, "name", None) or ""))
