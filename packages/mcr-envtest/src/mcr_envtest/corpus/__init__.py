"""A differential corpus: request sequences run against two API servers, answers compared.

The corpus (``sequences/*.yaml``, see :mod:`.model`) exercises what mcr-envtest serves; each
sequence runs on the server under test and on a reference (a real kube-apiserver), the answers are
normalised (:mod:`.normalise`) and compared structurally (:mod:`.compare`), and differences not on
the allow-list (``allowlist.yaml``, :mod:`.report`) fail. ``python -m mcr_envtest.corpus`` runs it
by hand. The corpus talks HTTP only; it imports nothing of the server's internals.
"""

from __future__ import annotations

from .client import Target, TargetError
from .compare import Answer, Difference
from .model import CorpusError, Sequence, Step, count_exchanges, load_corpus
from .normalise import Normaliser
from .report import Allowance, Report, load_allowlist
from .runner import Outcome, run_corpus

__all__ = [
    "Allowance",
    "Answer",
    "CorpusError",
    "Difference",
    "Normaliser",
    "Outcome",
    "Report",
    "Sequence",
    "Step",
    "Target",
    "TargetError",
    "count_exchanges",
    "load_allowlist",
    "load_corpus",
    "run_corpus",
]
