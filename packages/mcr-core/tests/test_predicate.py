from __future__ import annotations

from typing import Any

from mcr.predicate import (
    AnnotationChanged,
    Funcs,
    GenerationChanged,
    LabelChanged,
    ResourceVersionChanged,
    and_,
    not_,
    or_,
    predicate_from,
)


def obj(
    *,
    gen: int | None = 1,
    rv: str = "1",
    labels: dict[str, str] | None = None,
    ann: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x", "namespace": "ns", "resourceVersion": rv}
    if gen is not None:
        meta["generation"] = gen
    if labels is not None:
        meta["labels"] = labels
    if ann is not None:
        meta["annotations"] = ann
    return {"apiVersion": "v1", "kind": "Thing", "metadata": meta}


def test_generation_changed_filters_only_updates() -> None:
    p = GenerationChanged()
    assert p.update(obj(gen=1), obj(gen=2))
    assert not p.update(obj(gen=1, rv="1"), obj(gen=1, rv="2"))  # status-only change
    assert not p.update(obj(gen=None), obj(gen=None, rv="2"))  # kinds without generation
    assert not p.update(None, obj())
    assert p.create(obj())
    assert p.delete(obj())
    assert p.generic(obj())


def test_resource_version_changed() -> None:
    p = ResourceVersionChanged()
    assert p.update(obj(rv="1"), obj(rv="2"))
    assert not p.update(obj(rv="1"), obj(rv="1"))  # resync
    assert p.create(obj())


def test_label_and_annotation_changed() -> None:
    lp, ap = LabelChanged(), AnnotationChanged()
    assert lp.update(obj(labels={"a": "1"}), obj(labels={"a": "2"}))
    assert not lp.update(obj(labels={}), obj(labels=None))  # empty and missing are equal
    assert not lp.update(obj(labels={"a": "1"}, ann={"x": "1"}), obj(labels={"a": "1"}, ann={"x": "2"}))
    assert ap.update(obj(ann={"x": "1"}), obj(ann={"x": "2"}))
    assert not ap.update(obj(labels={"a": "1"}), obj(labels={"a": "2"}))


def test_combinators() -> None:
    gen, lab = GenerationChanged(), LabelChanged()
    spec_change = (obj(gen=1), obj(gen=2))
    label_change = (obj(labels={"a": "1"}), obj(labels={"a": "2"}))
    assert or_(gen, lab).update(*spec_change)
    assert or_(gen, lab).update(*label_change)
    assert not and_(gen, lab).update(*spec_change)
    assert and_(gen, lab).update(obj(gen=1, labels={"a": "1"}), obj(gen=2, labels={"a": "2"}))
    assert not_(gen).update(*label_change)
    assert not not_(gen).create(obj())
    assert and_().create(obj())  # empty and: everything passes
    assert not or_().create(obj())  # empty or: nothing passes


def test_predicate_from_applies_to_every_event() -> None:
    p = predicate_from(lambda o: o["metadata"].get("labels", {}).get("watch") == "yes")
    yes, no = obj(labels={"watch": "yes"}), obj(labels={"watch": "no"})
    assert p.create(yes)
    assert not p.create(no)
    assert p.update(no, yes)
    assert not p.update(yes, no)
    assert p.delete(yes)
    assert not p.delete(no)
    assert p.generic(yes)
    assert not p.generic(no)


def test_funcs_missing_functions_pass() -> None:
    p = Funcs(create=lambda o: False)
    assert not p.create(obj())
    assert p.update(obj(), obj())
    assert p.delete(obj())
    assert p.generic(obj())
