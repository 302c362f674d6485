"""CEL for CRD validation rules: :mod:`.parser` (text → tree), :mod:`.evaluator` (tree → value),
:mod:`.rules` (``x-kubernetes-validations`` of a CRD: checked when the CRD is written, enforced on
every write of its custom resources)."""
