"""Benchmark validity checks: is the member/non-member split itself trustworthy?"""

from imprint.diagnostics.blind import BLIND_WARN_DELTA, BlindResult, blind_baseline, blind_warning

__all__ = ["BLIND_WARN_DELTA", "BlindResult", "blind_baseline", "blind_warning"]
