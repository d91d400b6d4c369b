"""`tenk doctor`: the studies' anti-patterns, found statically in a FastAPI or Starlette app.

    >>> report = diagnose("myapp.main:app")
    >>> [finding.rule for finding in report.findings]
    ['blocking-call', 'per-request-client']

Each finding names its rule (`tenk.doctor.RULES`), its place, and the chain of calls from the entry
point that reaches it; the rule's `cost` is what tenk measured the pattern to cost. Nothing of the app is
imported or run.
"""

from tenk.doctor._costs import Cost
from tenk.doctor._diagnose import Report, diagnose
from tenk.doctor._findings import Finding, Step
from tenk.doctor._follow import DEFAULT_DEPTH
from tenk.doctor._project import TargetError
from tenk.doctor._rules import RULES, Rule

__all__ = ["DEFAULT_DEPTH", "RULES", "Cost", "Finding", "Report", "Rule", "Step", "TargetError", "diagnose"]
